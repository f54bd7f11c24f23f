package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"time"

	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
)

// openRound is a round being formed for one tenant.
type openRound struct {
	tenant   string
	requests []taken
	spans    int
	deadline time.Time
}

// batch forms rounds from the requests taken, one open round per tenant
// (client metadata): a round goes once batch.min_size spans wait in it, or
// batch.flush_timeout after its first request was taken, and holds at most
// batch.max_size spans (a larger request makes a round alone). Past
// batch.max_open_rounds tenants, the oldest open round goes early. At
// shutdown (pending closed) every open round goes at once.
func (r *routerReceiver) batch() {
	defer close(r.rounds)
	b := r.cfg.Batch
	var open []*openRound // oldest first
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	send := func(i int) {
		o := open[i]
		open = append(open[:i], open[i+1:]...)
		r.rounds <- o.requests
	}
	for {
		if armed && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		armed = false
		if len(open) > 0 {
			timer.Reset(time.Until(open[0].deadline))
			armed = true
		}
		select {
		case t, ok := <-r.pending:
			if !ok {
				for len(open) > 0 {
					send(0)
				}
				return
			}
			i := 0
			for i < len(open) && open[i].tenant != t.tenant {
				i++
			}
			if i < len(open) && open[i].spans+t.spans > b.MaxSize {
				send(i)
				i = len(open)
			}
			if i == len(open) {
				if len(open) == b.MaxOpenRounds {
					send(0)
					i--
				}
				open = append(open, &openRound{tenant: t.tenant, deadline: time.Now().Add(b.FlushTimeout)})
			}
			o := open[i]
			o.requests = append(o.requests, t)
			o.spans += t.spans
			if o.spans >= b.MinSize {
				send(i)
			}
		case <-timer.C:
			armed = false
			now := time.Now()
			for len(open) > 0 && !open[0].deadline.After(now) {
				send(0)
			}
		}
	}
}

// encode turns rounds into parts, one request per sampler holding its
// records of every request in the round (cut at the samplers' request
// size), and queues each with its sampler's sender. The requests' bytes
// and indexes are let go once encoded; the parts are held instead.
func (r *routerReceiver) encode() {
	defer r.encodersDone.Done()
	splits := make([]traceroute.Split, 0, 64)
	for round := range r.rounds {
		splits = splits[:0]
		var held int64
		for _, t := range round {
			splits = append(splits, t.split)
			held += t.held
		}
		ctx := round[0].ctx // every request of a round has the same metadata
		parts := r.router.Encode(splits)
		for _, p := range parts {
			r.charge(partCharge(p))
		}
		r.release(held)
		for _, p := range parts {
			r.senders.enqueue(ctx, p)
		}
	}
}

// partCharge is what a part holds while it waits and is sent: its
// encoding (a pooled buffer may be larger; the pool's slack is bounded by
// the sends at once).
func partCharge(p *traceroute.Part) int64 { return int64(len(p.Bytes)) }
