// Package shadow runs a candidate policy beside the live one: every trace
// the sampler decides is classified again under the candidate's budget,
// with the candidate's own adjuster (its own rates, correction and
// priming), and what it would keep is counted and booked for that adjuster
// to learn from. It decides nothing: no span is kept or dropped by it.
//
// It owns the candidate's adjuster, its policy file, the volumes it books
// (striped by the caller's shard index, each stripe under its own lock)
// and what it counts. It must not know the buffer, the spans or the live
// policy's state: the glue hands it a decided trace's traits, incoming
// threshold, randomness and size.
package shadow // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/shadow"

import (
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/livepolicy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Shadow is the candidate policy and what it would do.
type Shadow struct {
	adj *policy.Adjuster
	// cover tracks the keys the candidate would keep a trace of in each
	// rare interval (nil with rare off), for its rare-path coverage.
	cover   *rare.Tracker
	file    *livepolicy.Watcher
	maxKeys int
	stripes []stripe
	// intake and fragments are what the live drain measured since the
	// candidate's last drain (intake as float64 bits): it primes as the
	// live policy does.
	mu        sync.Mutex
	intake    float64
	fragments int64
}

// AddIntake hands the candidate what arrived (the live drain's figures).
func (s *Shadow) AddIntake(intake float64, fragments int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.intake += intake
	s.fragments += fragments
	s.mu.Unlock()
}

// stripe is one shard's share of the bookings.
type stripe struct {
	mu      sync.Mutex
	volumes policy.Volumes
	tally   Tally
	_       [64]byte // a stripe per cache line: shards decide in parallel
}

// Tally is what the candidate would have done, cumulative.
type Tally struct {
	// Traces by decision (0 not kept, 1 kept) and class.
	Traces [2][traceinfo.NumReasons]int64
	Spans  [2]int64
	Bytes  [2]int64
}

// New runs the candidate of file (read at once: an error fails the start)
// with the live configuration's settings s, over stripes shards.
func New(s policy.Settings, rs *rules.Set, file *livepolicy.Watcher, stripes int, logger *zap.Logger, strict bool) (*Shadow, error) {
	// A file that cannot be applied fails validate (strict), not a start:
	// the shadow runs the configuration's policy until the file changes.
	pol, ok, err := file.Start(logger, strict)
	if err != nil {
		return nil, err
	}
	sh := &Shadow{file: file, maxKeys: s.MaxKeys, stripes: make([]stripe, stripes)}
	for i := range sh.stripes {
		sh.stripes[i].volumes = policy.NewVolumes(rs.Len())
	}
	sh.adj = policy.NewAdjuster(s, rs, sh.drain)
	if s.RareInterval > 0 {
		sh.cover = rare.New(s.RareInterval, s.MaxKeys)
	}
	if ok {
		sh.adj.RetuneNow(pol.Retune)
	}
	return sh, nil
}

// Decide classifies a trace the live policy decided under the candidate:
// whether it would keep it, and books it. inTh is the threshold it arrived
// with, r its randomness, vol its volume in the budget's unit.
// A nil Shadow (none configured) does nothing, as do SetPeers and Observe.
func (s *Shadow) Decide(stripe int, t policy.Traits, inTh sampling.Threshold, r sampling.Randomness, spans int, bytes int64, vol float64, now int64) {
	if s == nil {
		return
	}
	c := s.adj.Policy().Classify(t)
	keep := traceinfo.Downstream(inTh, c.Prob.P).ShouldSample(r)
	if s.cover != nil {
		s.cover.Due(t.Booked, now)
		if keep {
			s.cover.Kept(t.Booked, now)
		}
	}
	d := traceinfo.Decided{Service: c.Service, Class: c.Reason, Rule: int16(c.Rule)}
	k := 0
	if keep {
		k = 1
	}
	st := &s.stripes[stripe]
	st.mu.Lock()
	st.volumes.Book(d, vol, keep, s.maxKeys)
	st.tally.Traces[k][c.Reason]++
	st.tally.Spans[k] += int64(spans)
	st.tally.Bytes[k] += bytes
	st.mu.Unlock()
}

// drain hands the candidate's adjuster what was booked since its last
// call, and what arrived meanwhile.
func (s *Shadow) drain() (policy.Volumes, float64, int64) {
	slots := s.adj.Rules().Len()
	v := policy.NewVolumes(slots)
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		cur := st.volumes
		st.volumes = policy.NewVolumes(slots)
		st.mu.Unlock()
		v.Add(&cur)
	}
	s.mu.Lock()
	intake, fragments := s.intake, s.fragments
	s.intake, s.fragments = 0, 0
	s.mu.Unlock()
	return v, intake, fragments
}

// Start starts the candidate's clock.
func (s *Shadow) Start(now time.Time) { s.adj.Start(now) }

// Tick runs the candidate's adjuster (every TickInterval).
func (s *Shadow) Tick(now time.Time) { s.adj.Tick(now) }

// TickInterval is how often Tick runs.
func (s *Shadow) TickInterval() time.Duration { return s.adj.TickInterval() }

// SetPeers follows the live tier's count: the candidate's share is its
// budget over the same samplers.
func (s *Shadow) SetPeers(n int64) {
	if s != nil {
		s.adj.SetPeers(n)
	}
}

// SetRareInterval follows the live rare interval, over which coverage
// is counted.
func (s *Shadow) SetRareInterval(d time.Duration) {
	if s != nil && s.cover != nil && d > 0 {
		s.cover.SetInterval(d)
		s.adj.SetRareInterval(d)
	}
}

// SetRules follows the live rules, which the candidate evaluates: the
// traits it is given are the live rules' matches.
func (s *Shadow) SetRules(rs *rules.Set) {
	if s != nil {
		s.adj.SetRules(rs)
	}
}

// Poll re-reads the candidate's file and retunes it when it changed
// (livepolicy.Watcher.Poll); a nil Shadow does nothing.
func (s *Shadow) Poll(logger *zap.Logger) {
	if s != nil {
		s.file.Poll(logger, func(pol livepolicy.Policy) { s.adj.Retune(pol.Retune) })
	}
}

// Policy is the candidate's policy now.
func (s *Shadow) Policy() *policy.Policy { return s.adj.Policy() }

// Share is this instance's part of the candidate's budget.
func (s *Shadow) Share() float64 { return s.adj.Share() }

// Version is the candidate's version.
func (s *Shadow) Version() string { return s.file.Version() }

// Tally sums what the candidate would have done.
func (s *Shadow) Tally() Tally {
	var t Tally
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		for d := range t.Traces {
			for r := range t.Traces[d] {
				t.Traces[d][r] += st.tally.Traces[d][r]
			}
			t.Spans[d] += st.tally.Spans[d]
			t.Bytes[d] += st.tally.Bytes[d]
		}
		st.mu.Unlock()
	}
	return t
}
