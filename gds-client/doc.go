// Package gdsclient is the module the Global Discovery Service uses to find Global Router
// pools and router replicas from imported EndpointSlices.
package gdsclient
