package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/ratelimit"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
)

// Config is the registry's configuration, one field per flag.
type Config struct {
	GRPCAddr        string
	RESTAddr        string
	AdminAddr       string
	Store           string
	TLSCertFile     string
	TLSKeyFile      string
	MaxRequestBytes int
	ShutdownTimeout time.Duration
	// DynamoDB store.
	DynamoDBTable string
	Region        string
	EndpointURL   string
	// ReplicationHeartbeatInterval: how often this replica writes its replication
	// heartbeat; 0: none.
	ReplicationHeartbeatInterval time.Duration
	// ReplicationStallHold bounds how long past its expiry a lease renewed through another
	// region is held while replication from that region lags; 0: never.
	ReplicationStallHold time.Duration
	// DynamoDBMaxRequests bounds this replica's requests in flight to the table; 0: none.
	DynamoDBMaxRequests int
	// Client authentication (docs/security.md).
	ClientCAFile    string
	TrustDomain     string
	AdminIdentities []string
	// Limits on what one client can make the registry hold or do (docs/security.md).
	MaxExportsPerCluster   int
	MaxEndpointsPerCluster int
	MaxBytesPerCluster     int
	MaxWatches             int
	MaxWatchesPerClient    int
	SendTimeout            time.Duration
	IdleTimeout            time.Duration
	MaxConnections         int
	// Each client's share of a replica (ratelimit.Share).
	ClientRate  float64
	ClientBurst float64
}

// Validate checks the configuration before anything starts.
func (c Config) Validate() error {
	var errs []error
	switch c.Store {
	case "memory":
	case "dynamodb":
		if c.DynamoDBTable == "" {
			errs = append(errs, errors.New("--dynamodb-table: required with --store=dynamodb"))
		}
		if c.MaxExportsPerCluster > dynamostore.MaxExportsPerCluster {
			errs = append(errs, fmt.Errorf("--max-exports-per-cluster: %d is more than %d, the most with --store=dynamodb (each cluster's export keys are one item, at most 400 KB)",
				c.MaxExportsPerCluster, dynamostore.MaxExportsPerCluster))
		}
	default:
		errs = append(errs, fmt.Errorf("--store: %q is not a store; use memory or dynamodb", c.Store))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file: set both or neither"))
	}
	if c.ClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("--client-ca-file: needs --tls-cert-file and --tls-key-file (client certificates are checked in the TLS handshake)"))
	}
	if c.ClientCAFile != "" && c.TrustDomain == "" {
		errs = append(errs, errors.New("--trust-domain: required with --client-ca-file"))
	}
	if c.MaxRequestBytes < 1<<20 || c.MaxRequestBytes > 256<<20 {
		errs = append(errs, fmt.Errorf("--max-request-bytes: %d is out of range, must be between 1 MiB and 256 MiB", c.MaxRequestBytes))
	}
	for _, l := range []struct {
		flag string
		v    int
	}{
		{"--max-exports-per-cluster", c.MaxExportsPerCluster}, {"--max-endpoints-per-cluster", c.MaxEndpointsPerCluster},
		{"--max-bytes-per-cluster", c.MaxBytesPerCluster},
		{"--max-watches", c.MaxWatches}, {"--max-watches-per-client", c.MaxWatchesPerClient}, {"--max-connections", c.MaxConnections},
	} {
		if l.v < 1 {
			errs = append(errs, fmt.Errorf("%s: %d must be at least 1", l.flag, l.v))
		}
	}
	if c.ClientRate < 0 {
		errs = append(errs, fmt.Errorf("--client-rate: %g must be 0 (no limit) or more", c.ClientRate))
	}
	// A burst must hold the largest request, or that request could never be afforded.
	if minBurst := 1 + float64(c.MaxRequestBytes)/ratelimit.UnitBytes; c.ClientRate > 0 && c.ClientBurst < minBurst {
		errs = append(errs, fmt.Errorf("--client-burst: %g must be at least %g, the cost of the largest request (--max-request-bytes %d: 1 unit and 1 for every 16 KiB)", c.ClientBurst, minBurst, c.MaxRequestBytes))
	}
	if c.SendTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--send-timeout: %s must be at least 1s", c.SendTimeout))
	}
	if c.IdleTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--idle-timeout: %s must be at least 1s", c.IdleTimeout))
	}
	if h := c.ReplicationStallHold; h < 0 || h > time.Hour {
		errs = append(errs, fmt.Errorf("--replication-stall-hold: %s must be between 0 (no hold) and 1h", h))
	}
	if n := c.DynamoDBMaxRequests; n < 0 || n > 100000 {
		errs = append(errs, fmt.Errorf("--dynamodb-max-requests: %d must be between 0 (no bound) and 100000", n))
	}
	if h := c.ReplicationHeartbeatInterval; h != 0 && (h < 500*time.Millisecond || h > time.Minute) {
		errs = append(errs, fmt.Errorf("--replication-heartbeat-interval: %s must be 0 (no heartbeats) or between 500ms and 1m", h))
	}
	return errors.Join(errs...)
}
