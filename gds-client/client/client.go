// Package client is a typed Go client of the Global Discovery Service's /pools and /routers.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/api"
)

// Client calls one Global Discovery Service.
type Client struct {
	base string
	http *http.Client
}

// New returns a client for baseURL (for example http://global-discovery-service:8080).
// A nil httpClient means http.DefaultClient.
func New(baseURL string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), http: httpClient}
}

// Pools returns the pools the service lists.
func (c *Client) Pools(ctx context.Context) ([]api.Pool, error) {
	var r api.PoolsResponse
	if err := c.get(ctx, "/pools", &r); err != nil {
		return nil, err
	}
	return r.Pools, checkVersion(r.APIVersion)
}

// Routers returns the router replicas the service lists.
func (c *Client) Routers(ctx context.Context) ([]api.Router, error) {
	var r api.RoutersResponse
	if err := c.get(ctx, "/routers", &r); err != nil {
		return nil, err
	}
	return r.Routers, checkVersion(r.APIVersion)
}

func checkVersion(v string) error {
	if v != api.APIVersion {
		return fmt.Errorf("response api_version %q, this client reads %q", v, api.APIVersion)
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: read body: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}
