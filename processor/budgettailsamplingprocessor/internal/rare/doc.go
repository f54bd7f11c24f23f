// Package rare remembers, per fairness key, when a trace of it was last
// kept as rare, so that every key seen within rare.interval has one whole
// trace kept in it.
//
// The first trace decided of a key in each interval (aligned to the
// clock) is kept with rare's probability (1 unless the rare traces need
// more than the budget leaves them; then the policy thins them all alike),
// on top of the probability it arrived with; later ones take the policy's
// probability. Whether a trace is the first depends on when it was
// decided, not on its randomness, so the th each kept trace carries still
// weighs it right: the first counts 1/p_rare, the others 1/p each, and
// th-weighted counts stay unbiased.
//
// It owns the table of keys and its bound. It must not know traces, spans,
// policies or budgets: the caller asks Due when it decides a trace, and
// books what Due keeps.
package rare // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
