package dynamodb

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Replication heartbeats. Every replica writes, every interval, a small item of its own
// into the table; Global Tables carry it to the other regions, where it appears on their
// stream. From its stream and its own clock only — clocks of different regions are never
// compared — each replica measures how far behind each other region's writes reach it:
//
//   - round trip: a heartbeat echoes, for every replica it heard, the last sequence number
//     it heard and how long it has held it (the holder's own clock, a duration); a replica
//     that finds its own sequence number echoed takes (now - when it sent it - held) / 2 as
//     the one-way lag of that path;
//   - silence: a replica that has heard nothing of another for longer than the interval
//     adds the excess to that lag, so a stalled region shows at once, not at its next echo.
//
// The items sit in a partition of their own with sort keys "USAGE#HEARTBEAT#<region>#<replica>":
// no read of a clusterset queries it, and the change feed of a replica that predates the
// heartbeats skips every USAGE# item, so replicas of both versions share the table.
const (
	replicationPK   = "CS#mcs-replication"
	heartbeatPrefix = "USAGE#HEARTBEAT#"
	// forgetSilent: a replica removes the heartbeat item of a replica of its own region
	// silent this long (a pod that was killed): its region's live replicas clean up after it.
	forgetSilent = 10 * time.Minute
	// sentKept bounds the send times a replica keeps to match echoes.
	sentKept = 512
)

// ReplicationOptions turn on the heartbeats (Options.Replication).
type ReplicationOptions struct {
	// Region is this replica's region; Replica names it among its region's replicas (a pod
	// name). Neither may contain "#".
	Region, Replica string
	// Interval between heartbeats; 0: 2 s.
	Interval time.Duration
}

type replication struct {
	region, replica string
	interval        time.Duration

	mu    sync.Mutex
	seq   int64
	sent  map[int64]time.Time
	peers map[string]*peer // by "<region>#<replica>"
	// peaks are, by region, the highest lag bound of the last lagPeakWindow.
	peaks map[string]lagPeak
}

// lagPeak is a lag bound and when it was last that high.
type lagPeak struct {
	lag time.Duration
	at  time.Time
}

// lagPeakWindow is how long a lag bound is kept after it falls. When replication resumes
// after a stall, the first heartbeat ends the silence at once, while the writes queued
// with it — the renewals of the clusters held meanwhile — are still being applied, in no
// order Global Tables guarantee across items: a bound that fell at once expired those
// clusters until their renewals landed (a test saw 100–280 ms without their endpoints).
// A held lease stays bounded by the hold all the same.
const lagPeakWindow = 10 * time.Second

type peer struct {
	region   string
	lastSeen time.Time // when its latest heartbeat arrived
	seq      int64
	seqSeen  time.Time // when seq first arrived
	// rtt is the last round trip of a heartbeat to it and back, less its hold.
	rtt time.Duration
}

func newReplication(o ReplicationOptions) *replication {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	return &replication{region: o.Region, replica: o.Replica, interval: o.Interval, sent: map[int64]time.Time{}, peers: map[string]*peer{}, peaks: map[string]lagPeak{}}
}

func (r *replication) self() string { return r.region + "#" + r.replica }

// RunHeartbeats writes this replica's heartbeat every interval until ctx ends, then removes
// it. Without ReplicationOptions it returns at once.
func (st *Store) RunHeartbeats(ctx context.Context) {
	r := st.replication
	if r == nil {
		return
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		st.heartbeat(ctx)
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := st.api.DeleteItem(dctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(replicationPK, heartbeatPrefix+r.self())}); err != nil {
				st.dropped("heartbeat_cleanup", err)
			}
			cancel()
			return
		case <-t.C:
		}
	}
}

func (st *Store) heartbeat(ctx context.Context) {
	// Late, a heartbeat makes other regions' replicas hold leases as if replication lagged.
	ctx = withUrgency(ctx)
	r := st.replication
	now := st.now()
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.sent[seq] = now
	delete(r.sent, seq-sentKept)
	echo := map[string]types.AttributeValue{}
	var silent []string
	for k, p := range r.peers {
		echo[k] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"seq": numAttr(p.seq), "holdMs": numAttr(now.Sub(p.seqSeen).Milliseconds()),
		}}
		if p.region == r.region && now.Sub(p.lastSeen) > forgetSilent {
			silent = append(silent, k)
		}
	}
	r.mu.Unlock()
	item := key(replicationPK, heartbeatPrefix+r.self())
	item["region"] = strAttr(r.region)
	item["seq"] = numAttr(seq)
	item["echo"] = &types.AttributeValueMemberM{Value: echo}
	if _, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &st.table, Item: item}); err != nil {
		st.dropped("heartbeat", err)
	}
	for _, k := range silent {
		if _, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(replicationPK, heartbeatPrefix+k)}); err != nil {
			st.dropped("heartbeat_cleanup", err)
		}
	}
}

// isHeartbeat tells a heartbeat's stream record from the clustersets' ones.
func isHeartbeat(keys map[string]streamtypes.AttributeValue) bool {
	return keyString(keys, attrPK) == replicationPK && strings.HasPrefix(keyString(keys, attrSK), heartbeatPrefix)
}

// observeHeartbeat takes another replica's heartbeat off the stream.
func (st *Store) observeHeartbeat(rec streamtypes.Record) {
	r := st.replication
	if r == nil {
		return
	}
	k := strings.TrimPrefix(keyString(rec.Dynamodb.Keys, attrSK), heartbeatPrefix)
	region, _, ok := strings.Cut(k, "#")
	if !ok || k == r.self() {
		return
	}
	now := st.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.EventName == streamtypes.OperationTypeRemove {
		delete(r.peers, k)
		return
	}
	img := rec.Dynamodb.NewImage
	seq := streamN(img["seq"])
	p := r.peers[k]
	if p == nil {
		if len(r.peers) >= 1000 {
			return // a bound on what the table can make a replica hold
		}
		p = &peer{region: region}
		r.peers[k] = p
	}
	p.lastSeen = now
	if seq != p.seq {
		p.seq, p.seqSeen = seq, now
	}
	echo, _ := img["echo"].(*streamtypes.AttributeValueMemberM)
	if echo == nil {
		return
	}
	mine, _ := echo.Value[r.self()].(*streamtypes.AttributeValueMemberM)
	if mine == nil {
		return
	}
	if sentAt, ok := r.sent[streamN(mine.Value["seq"])]; ok {
		p.rtt = max(now.Sub(sentAt)-time.Duration(streamN(mine.Value["holdMs"]))*time.Millisecond, 0)
	}
}

func streamN(v streamtypes.AttributeValue) int64 {
	n, ok := v.(*streamtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	x, _ := strconv.ParseInt(n.Value, 10, 64)
	return x
}

// ReplicationLag returns, for each other region heard from, how far behind its writes
// reach this replica now: the freshest of its replicas' paths (one-way lag, half the round
// trip, plus the silence beyond the interval). Nil without heartbeats.
func (st *Store) ReplicationLag() map[string]time.Duration {
	return st.lag(func(p *peer) time.Duration { return p.rtt / 2 })
}

// ReplicationLagBound is ReplicationLag with the whole round trip in place of its half: a
// bound of the lag that holds when replication is lopsided. After a stall, the first
// heartbeats to arrive were held up one way only, and half their round trip is half the
// stall; leases are judged by the bound (package lease). A bound that falls is kept for
// lagPeakWindow.
func (st *Store) ReplicationLagBound() map[string]time.Duration {
	out := st.lag(func(p *peer) time.Duration { return p.rtt })
	r := st.replication
	if r == nil {
		return out
	}
	now := st.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for region, lag := range out {
		pk, ok := r.peaks[region]
		if !ok || lag >= pk.lag || now.Sub(pk.at) > lagPeakWindow {
			r.peaks[region] = lagPeak{lag: lag, at: now}
			continue
		}
		out[region] = pk.lag
	}
	return out
}

// lag is, for each other region, the least of its replicas' path lags plus the silence
// since each was last heard beyond the interval.
func (st *Store) lag(path func(*peer) time.Duration) map[string]time.Duration {
	r := st.replication
	if r == nil {
		return nil
	}
	now := st.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Duration{}
	for _, p := range r.peers {
		if p.region == r.region {
			continue
		}
		// The freshest write heard from it was already that old when it arrived; silence
		// beyond a heartbeat's interval adds to that.
		lag := path(p) + max(now.Sub(p.lastSeen)-r.interval, 0)
		if cur, ok := out[p.region]; !ok || lag < cur {
			out[p.region] = lag
		}
	}
	return out
}
