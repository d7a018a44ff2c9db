package registryclient

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Session keeps this cluster registered: it registers, renews the lease every
// RenewInterval, and registers again — then tells its listener, which sends all its
// exports at once — whenever the registry does not know the cluster (FAILED_PRECONDITION,
// for example after a memory-store restart).
type Session struct {
	Pool          *Pool
	Clusterset    string
	ClusterID     string
	Region        string
	LeaseDuration time.Duration
	// Version is this controller's version, sent with each registration (version-skew checks).
	Version       string
	RenewInterval time.Duration
	// RetryInterval is the wait after a failed registration or renewal.
	RetryInterval time.Duration
	// VerifyEvery: after this many renewals, the listener's Registered runs again, so it can
	// check that the registry still holds its exports (anti-entropy: a replicated deletion
	// or an operator's change cannot leave them missing for long). 0: never.
	VerifyEvery int
	Log         *slog.Logger
	Metrics     Metrics

	mu         sync.Mutex
	listener   SessionListener
	registered bool
	// generation counts registrations: exports sent under an older one must be sent again.
	generation int64
	lastRenew  time.Time
	// offset is the registry's clock minus this one's, measured on the last renewal whose
	// round trip was short enough (clockOK).
	offset   time.Duration
	clockOK  bool
	renewals int
	// verifyPhase: the renewals r with r % VerifyEvery == verifyPhase check the exports.
	verifyPhase int
	kick        chan struct{}
	// problem says why the last registration or renewal failed; "" after a success.
	problem string
}

// State is the session as the export reconciler sees it.
type State struct {
	// Registered: the registry knows the cluster and its exports were sent after the last
	// registration.
	Registered bool
	// LeaseValid: the last successful registration or renewal is younger than the lease.
	LeaseValid bool
	Generation int64
	// Ever: the cluster was registered at least once by this process.
	Ever bool
	// Problem says why the last registration or renewal failed, with the fix when the
	// cause is a known misconfiguration (Diagnose); "" when it succeeded.
	Problem string
}

// State returns the current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{
		Registered: s.registered,
		LeaseValid: !s.lastRenew.IsZero() && time.Now().Before(s.lastRenew.Add(s.LeaseDuration)),
		Generation: s.generation,
		Ever:       s.generation > 0,
		Problem:    s.problem,
	}
}

// Lost tells the session that the registry no longer knows the cluster (a write got
// FAILED_PRECONDITION): it registers again at once.
func (s *Session) Lost() {
	s.mu.Lock()
	s.registered = false
	s.mu.Unlock()
	s.Check()
}

// Check renews (or registers) at once instead of at the next interval: another registry
// process answers, which may not know the cluster. It never blocks.
func (s *Session) Check() {
	s.mu.Lock()
	kick := s.kick
	s.mu.Unlock()
	select {
	case kick <- struct{}{}:
	default:
	}
}

// SessionListener is what the session tells (the export reconciler).
type SessionListener interface {
	// Registered runs after every successful registration, before renewals go on, and
	// every VerifyEvery renewals: the listener sends all its exports under generation.
	Registered(ctx context.Context, generation int64) error
	// StateChanged runs when the session's state changes (registered, lease valid).
	StateChanged(ctx context.Context)
}

func (s *Session) notify(ctx context.Context) {
	if s.listener != nil {
		s.listener.StateChanged(ctx)
	}
}

func (s *Session) registeredAgain(ctx context.Context, gen int64) error {
	if s.listener == nil {
		return nil
	}
	return s.listener.Registered(ctx, gen)
}

// Run keeps the session until ctx ends, telling l what happens.
func (s *Session) Run(ctx context.Context, l SessionListener) error {
	s.mu.Lock()
	s.listener = l
	s.kick = make(chan struct{}, 1)
	s.mu.Unlock()
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	wasValid, wasProblem := false, ""
	for {
		gen := s.State().Generation
		err := s.step(ctx)
		wait := renewWait(s.RenewInterval, s.State().Generation != gen)
		if err != nil && ctx.Err() != nil {
			return nil
		}
		problem := ""
		if err != nil {
			hint := Diagnose(err)
			if hint != "" {
				s.Log.Warn("registry session", "error", err, "url", s.Pool.Current(), "hint", hint)
				problem = hint
			} else {
				s.Log.Warn("registry session", "error", err, "url", s.Pool.Current())
				problem = truncate(err.Error(), maxProblem)
			}
			wait = s.RetryInterval
		}
		s.mu.Lock()
		s.problem = problem
		s.mu.Unlock()
		if valid := s.State().LeaseValid; valid != wasValid || problem != wasProblem {
			wasValid, wasProblem = valid, problem
			s.notify(ctx)
		}
		// Wake before the lease could lapse unnoticed, and at once when kicked.
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-time.After(wait):
		}
	}
}

// renewWait is the wait before the next renewal: up to a tenth of the interval early, and
// after a registration anywhere in its second half. Clusters that registered together (a
// registry restart brings back every cluster within seconds) would otherwise renew, and
// check their exports every VerifyEvery renewals, in one burst for good; a renewal that
// comes early only renews sooner.
func renewWait(interval time.Duration, registered bool) time.Duration {
	early := interval / 10
	if registered {
		early = interval / 2
	}
	if early <= 0 {
		return interval
	}
	return interval - rand.N(early) //nolint:gosec // spreading timers needs no secret
}

// maxClockRoundTrip bounds the round trip of a renewal the clock offset is taken from: the
// offset is known to within half of it.
const maxClockRoundTrip = time.Second

// measureClock takes the registry's clock from a renewal: its renew time is the registry's
// now, somewhere within the round trip; the middle is the best guess.
func (s *Session) measureClock(sent, received, registryTime time.Time) {
	rtt := received.Sub(sent)
	if rtt > maxClockRoundTrip || registryTime.IsZero() {
		return
	}
	s.mu.Lock()
	s.offset, s.clockOK = registryTime.Sub(sent.Add(rtt/2)), true
	s.mu.Unlock()
}

// RegistryNow is the registry's clock now, as the last renewal measured it; false before
// one did.
func (s *Session) RegistryNow() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset), s.clockOK
}

func (s *Session) step(ctx context.Context) error {
	s.mu.Lock()
	registered := s.registered
	s.mu.Unlock()
	if registered {
		err := s.Pool.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
			sent := time.Now()
			resp, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: s.Clusterset, ClusterId: s.ClusterID})
			if err == nil {
				s.measureClock(sent, time.Now(), resp.GetCluster().GetLease().GetRenewTime().AsTime())
			}
			return err
		})
		if f := s.Metrics.Heartbeat; f != nil {
			f(err == nil)
		}
		if err == nil {
			s.mu.Lock()
			s.lastRenew = time.Now()
			s.renewals++
			verify := s.VerifyEvery > 0 && s.renewals%s.VerifyEvery == s.verifyPhase
			gen := s.generation
			s.mu.Unlock()
			if verify {
				if err := s.registeredAgain(ctx, gen); err != nil {
					return fmt.Errorf("verify exports: %w", err)
				}
			}
			return nil
		}
		if status.Code(err) != codes.FailedPrecondition {
			return fmt.Errorf("renew lease: %w", err)
		}
		s.Log.Warn("the registry does not know this cluster; registering again", "error", err)
		s.mu.Lock()
		s.registered = false
		s.mu.Unlock()
		s.notify(ctx)
	}
	start := time.Now()
	var resp *registryv1.RegisterClusterResponse
	err := s.Pool.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		sent := time.Now()
		resp, err = c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{
			Clusterset: s.Clusterset, ClusterId: s.ClusterID, Region: s.Region, LeaseDuration: durationpb.New(s.LeaseDuration),
			ControllerVersion: s.Version,
		})
		if err == nil {
			s.measureClock(sent, time.Now(), resp.GetCluster().GetLease().GetRenewTime().AsTime())
		}
		return err
	})
	if f := s.Metrics.Register; f != nil {
		f(err == nil)
	}
	if err != nil {
		return fmt.Errorf("register cluster %s/%s: %w", s.Clusterset, s.ClusterID, err)
	}
	s.mu.Lock()
	s.lastRenew = start
	s.generation++
	gen := s.generation
	if s.VerifyEvery > 0 {
		// Which renewal of every VerifyEvery checks the exports, drawn per registration
		// for the reason of renewWait.
		s.verifyPhase = rand.IntN(s.VerifyEvery) //nolint:gosec // spreading timers needs no secret
	}
	s.mu.Unlock()
	if err := s.registeredAgain(ctx, gen); err != nil {
		return fmt.Errorf("send exports after registering: %w", err)
	}
	s.mu.Lock()
	s.registered = true
	s.mu.Unlock()
	s.Log.Info("cluster registered", "clusterset", s.Clusterset, "cluster", s.ClusterID, "region", s.Region,
		"lease", resp.GetCluster().GetLease().GetDuration().AsDuration(), "url", s.Pool.Current(), "generation", gen)
	s.notify(ctx)
	return nil
}

// maxProblem bounds State.Problem, which lands in a condition message.
const maxProblem = 512

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
