package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// openStore opens the configured store. The DynamoDB store takes its credentials from the
// default AWS chain, its region from --region or AWS_REGION, and its endpoint from
// --endpoint-url or AWS_ENDPOINT_URL_DYNAMODB.
// hooks are the DynamoDB store's reports (Capacity, BadItem, DroppedWrite, SweptChunks).
func openStore(ctx context.Context, cfg Config, hooks dynamostore.Options) (store.Store, error) {
	// The per-cluster quotas, enforced by the store in each write across every replica.
	quota := store.Quota{Exports: cfg.MaxExportsPerCluster, Endpoints: cfg.MaxEndpointsPerCluster, Bytes: cfg.MaxBytesPerCluster}
	if cfg.Store == "memory" {
		return memory.New(memory.WithQuota(quota)), nil
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("--region: required with --store=dynamodb when AWS_REGION is not set")
	}
	endpoint := cfg.EndpointURL
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	}
	if endpoint != "" {
		awsCfg.BaseEndpoint = aws.String(endpoint)
	}
	client := dynamodb.NewFromConfig(awsCfg)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stOpts := hooks
	stOpts.Client, stOpts.Streams, stOpts.Table, stOpts.Region, stOpts.Quota = client, dynamodbstreams.NewFromConfig(awsCfg), cfg.DynamoDBTable, awsCfg.Region, quota
	stOpts.MaxRequests = cfg.DynamoDBMaxRequests
	if cfg.ReplicationHeartbeatInterval > 0 {
		stOpts.Replication = &dynamostore.ReplicationOptions{Region: awsCfg.Region, Replica: replicaName(), Interval: cfg.ReplicationHeartbeatInterval}
	}
	st := dynamostore.New(stOpts)
	if err := st.Ping(pctx); err != nil {
		return nil, fmt.Errorf("--dynamodb-table %s in %s: %w (create it with mcs-admin create-table)", cfg.DynamoDBTable, awsCfg.Region, err)
	}
	return st, nil
}

// replicaName names this replica among its region's: the pod's name (its hostname) and
// process id (1 in a pod, so a restarted pod takes its item back), or a random one.
func replicaName() string {
	if h, err := os.Hostname(); err == nil && h != "" && !strings.Contains(h, "#") {
		return fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	return "replica-" + rand.Text()
}

// storeCheckEvery is how often the store is asked whether it answers.
const storeCheckEvery = 5 * time.Second

// storeHealth is the store's answer to its last check, which gRPC health, /readyz and
// mcs_registry_store_up all report: one check every storeCheckEvery, however often they
// are asked.
type storeHealth struct {
	mu      sync.Mutex
	checked bool
	err     error
}

// state returns the last check's error; an error until the first check is done.
func (h *storeHealth) state() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked {
		return errors.New("not checked yet")
	}
	return h.err
}

// follow checks the store until ctx ends and sets the gRPC health of the server ("" and
// the registry service) from each answer. After the registry's Shutdown the health server
// ignores changes and says NOT_SERVING.
func (h *storeHealth) follow(ctx context.Context, hs *health.Server, st interface {
	Ping(context.Context) error
}, up func(float64)) {
	services := []string{"", registryv1.RegistryService_ServiceDesc.ServiceName}
	set := func(status healthpb.HealthCheckResponse_ServingStatus) {
		for _, s := range services {
			hs.SetServingStatus(s, status)
		}
	}
	t := time.NewTicker(storeCheckEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := st.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		h.checked, h.err = true, err
		h.mu.Unlock()
		if err != nil {
			set(healthpb.HealthCheckResponse_NOT_SERVING)
			up(0)
		} else {
			set(healthpb.HealthCheckResponse_SERVING)
			up(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
