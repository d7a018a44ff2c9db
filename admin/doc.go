// Package admin is the module of mcs-admin, the operator CLI that works on the registry's
// DynamoDB store (create-table, describe, delete-cluster).
package admin
