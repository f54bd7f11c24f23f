// Package policy turns what the sampler decided into what it decides next:
// the budget's unit (spans, bytes or money), the estimator (smoothed rates
// per class and service, the priority cap, weighted max-min fairness and an
// integral correction), the Policy it publishes (the probability of each
// class and service), and the Adjuster that recomputes it every interval,
// primes it at start-up and after idling, and scales it by what kept traces
// weigh as they leave (EgressMeter).
//
// It owns probabilities and rates. It must not know how traces are buffered
// or forwarded: the processor hands it volumes (Volumes, through a drain
// function) and reads the Policy.
package policy
