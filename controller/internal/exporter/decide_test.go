package exporter

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// TestDecideExport: the exporter's decision for every state of the session, of what the
// registry last answered and of the watch.
func TestDecideExport(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "relay"}
	content := func(port int32) *registryv1.ExportContent {
		return &registryv1.ExportContent{Service: svc, Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: port}}}}
	}
	up := registryclient.State{Registered: true, LeaseValid: true, Ever: true, Generation: 1}
	portConflict := &registryv1.ExportVerdict{Participating: true, WinningClusterId: "a", Conflicts: []registryv1.ConflictReason{registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT}}
	accepted := func(port int32, age time.Duration, v *registryv1.ExportVerdict) *sent {
		if v == nil {
			v = &registryv1.ExportVerdict{Participating: true, WinningClusterId: "b"}
		}
		return &sent{content: content(port), generation: 1, verdict: v, written: now.Add(-age), at: now.Add(-age)}
	}
	importWith := func(written time.Time, conflicts ...registryv1.ConflictReason) *registryv1.ServiceImport {
		return &registryv1.ServiceImport{Service: svc, WinningClusterId: "a", Conflicts: conflicts, Clusters: []*registryv1.ImportCluster{
			{ClusterId: "b", ExportUpdateTime: timestamppb.New(written), Conflicts: conflicts}}}
	}
	tests := []struct {
		name    string
		st      registryclient.State
		last    *sent
		desired *registryv1.ExportContent
		imp     *registryv1.ServiceImport
		// want: "put <port>" or "Ready=<status> <reason> Conflict=<status> <reason>"
		want        string
		wantRequeue time.Duration
		wantMessage string // in Ready's message
	}{
		{"never registered: pending, with the cause", registryclient.State{Problem: "connection refused"}, nil, content(80), nil,
			"Ready=Unknown Pending Conflict=Unknown Pending", 0, "waiting for the cluster to register with the registry: connection refused"},
		{"was registered, lease gone", registryclient.State{Ever: true}, nil, content(80), nil,
			"Ready=False ClusterLeaseExpired Conflict=Unknown Pending", 0, "heartbeats are not reaching the registry"},
		{"registered, lease gone", registryclient.State{Registered: true, Ever: true}, accepted(80, time.Minute, nil), content(80), nil,
			"Ready=False ClusterLeaseExpired Conflict=Unknown Pending", 0, ""},
		{"nothing sent yet", up, nil, content(80), nil, "put 80", 0, ""},
		{"the registry has it: no write", up, accepted(80, time.Minute, nil), content(80), nil,
			"Ready=True Ready Conflict=False NoConflicts", 0, "exported to the registry"},
		{"registered again (new generation): sent again", registryclient.State{Registered: true, LeaseValid: true, Ever: true, Generation: 2},
			accepted(80, time.Minute, nil), content(80), nil, "put 80", 0, ""},
		{"changed within the batch period: waits, the last answer stands", up, accepted(80, 30*time.Millisecond, nil), content(81), nil,
			"Ready=True Ready Conflict=False NoConflicts", 70 * time.Millisecond, ""},
		{"changed after the batch period: sent", up, accepted(80, time.Second, nil), content(81), nil, "put 81", 0, ""},
		{"rejected: not sent again", up, &sent{content: content(80), generation: 1, rejected: "spec.ports[0]: bad", at: now.Add(-time.Minute)}, content(80), nil,
			"Ready=False Failed Conflict=False NoConflicts", 0, "the registry rejected the export: spec.ports[0]: bad"},
		{"over a limit: waits for LimitRetry", up, &sent{content: content(80), generation: 1, overLimit: "1001 exports", at: now.Add(-10 * time.Second)}, content(80), nil,
			"Ready=False Failed Conflict=False NoConflicts", LimitRetry - 10*time.Second, "retrying every 30s"},
		{"over a limit, LimitRetry past: sent again", up, &sent{content: content(80), generation: 1, overLimit: "1001 exports", at: now.Add(-LimitRetry)}, content(80), nil,
			"put 80", 0, ""},
		{"the put's verdict: a conflict", up, accepted(80, time.Minute, portConflict), content(80), nil,
			"Ready=True Ready Conflict=True PortConflict", 0, ""},
		{"the watch shows the write and newer news: the watch's verdict", up, accepted(80, time.Minute, portConflict), content(80), importWith(now.Add(-time.Second)),
			"Ready=True Ready Conflict=False NoConflicts", 0, ""},
		{"the watch does not show the write yet: the put's verdict", up, accepted(80, time.Minute, nil), content(80),
			importWith(now.Add(-time.Hour), registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT), "Ready=True Ready Conflict=False NoConflicts", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := decideExport(exportInput{Session: tc.st, Desired: tc.desired, Last: tc.last, Import: tc.imp, ClusterID: "b",
				Now: now, BatchPeriod: 100 * time.Millisecond, LimitRetry: LimitRetry})
			got := "Ready=" + string(a.Ready.Status) + " " + a.Ready.Reason + " Conflict=" + string(a.Conflict.Status) + " " + a.Conflict.Reason
			if a.Put {
				got = "put " + strconv.Itoa(int(a.Content.GetSpec().GetPorts()[0].GetPort()))
			}
			if got != tc.want || a.Requeue != tc.wantRequeue || !strings.Contains(a.Ready.Message, tc.wantMessage) {
				t.Fatalf("decision %q (requeue %s, Ready message %q), want %q (requeue %s, message with %q)",
					got, a.Requeue, a.Ready.Message, tc.want, tc.wantRequeue, tc.wantMessage)
			}
		})
	}
}
