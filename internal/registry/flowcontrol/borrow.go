package flowcontrol

import (
	"math"
	"time"
)

// The borrowing between levels, as upstream's (KEP-1040): every period
// each limited level's seats (current) are set again between its bounds,
// from what it asked for during the period: a level that asked for less
// than its nominal seats lends the rest, up to its lendablePercent, and
// one that asked for more borrows, up to its borrowingLimitPercent, from
// the seats the others lend.

// borrowingPeriod is how often the seats are shared out again.
const borrowingPeriod = 10 * time.Second

// smoothing is how slowly a level's smoothed demand falls: each period
// keeps this share of the last and takes the rest from the new.
const smoothing = 0.977

// demand integrates the seats a level was asked for (executing and
// waiting requests) over time: their highest, mean and deviation over the
// current period.
type demand struct {
	at                  time.Time // when x last changed
	x                   int
	high                int
	sum, sumSq, elapsed float64
	smoothed            float64 // across periods
	lastHigh            int     // the last period's high
}

// observe records that x seats are asked for from now on.
func (d *demand) observe(now time.Time, x int) {
	if !d.at.IsZero() {
		dt := now.Sub(d.at).Seconds()
		if dt > 0 {
			v := float64(d.x)
			d.sum += v * dt
			d.sumSq += v * v * dt
			d.elapsed += dt
		}
	}
	d.at, d.x = now, x
	d.high = max(d.high, x)
}

// roll ends a period at now: it keeps the period's high and moves the
// smoothed demand (which never falls below the period's mean plus its
// deviation), then starts the next period.
func (d *demand) roll(now time.Time) {
	d.observe(now, d.x)
	if d.elapsed > 0 {
		mean := d.sum / d.elapsed
		dev := math.Sqrt(max(0, d.sumSq/d.elapsed-mean*mean))
		envelope := mean + dev
		d.smoothed = math.Max(envelope, smoothing*d.smoothed+(1-smoothing)*envelope)
	}
	d.lastHigh = d.high
	d.high, d.sum, d.sumSq, d.elapsed = d.x, 0, 0, 0
}

// share is one limited level's part in a sharing out: its bounds, and the
// seats it would take at a fair share of 1.
type share struct {
	lower, upper, target float64
}

// minTarget keeps a level that asked for nothing in the sharing.
const minTarget = 0.001

// shareOut divides total seats among the parts: each gets fair × its
// target, within its bounds, for the one fair share that makes the sum
// total. If the bounds alone decide (their lows sum to more than total,
// or their highs to less), each gets its bound.
func shareOut(total float64, parts []share) []float64 {
	out := make([]float64, len(parts))
	at := func(fair float64) float64 {
		sum := 0.0
		for i, p := range parts {
			out[i] = min(max(fair*max(p.target, minTarget), p.lower), p.upper)
			sum += out[i]
		}
		return sum
	}
	lo, hi := 0.0, 1.0
	if at(lo) >= total {
		return out
	}
	for at(hi) < total {
		if hi > 1e12 {
			return out // every part at its upper bound
		}
		hi *= 2
	}
	for range 100 {
		mid := (lo + hi) / 2
		if at(mid) < total {
			lo = mid
		} else {
			hi = mid
		}
	}
	at(hi)
	return out
}

// maxRetryAfter is the longest Retry-After a refused request is told, in
// seconds, as upstream's.
const maxRetryAfter = 32

// drops counts a level's refused requests per second, for the Retry-After
// it tells refused clients: 1 second at first; doubled (up to 32) when the
// refusals over the last Retry-After seconds reach three a second, at
// most once per Retry-After; shortened by one when they fall below one a
// second. As upstream's, it changes only when a second with refusals
// begins.
type drops struct {
	retryAfter int64 // seconds; 0 means 1
	raisedAt   int64
	sec        int64  // the second counted now (Unix)
	count      int64  // refusals in it
	past       []drop // earlier seconds with refusals, oldest first
}

type drop struct{ sec, count int64 }

func (d *drops) after() int64 { return max(d.retryAfter, 1) }

// record counts a refusal at now.
func (d *drops) record(now time.Time) {
	sec := now.Unix()
	if sec == d.sec {
		d.count++
		return
	}
	if d.count > 0 {
		d.past = append(d.past, drop{d.sec, d.count})
	}
	keep := min(2*d.after(), maxRetryAfter)
	for len(d.past) > 0 && sec-d.past[0].sec > keep {
		d.past = d.past[1:]
	}
	d.sec, d.count = sec, 1
	ra := d.after()
	recent := int64(0)
	for _, p := range d.past {
		if sec-p.sec <= ra {
			recent += p.count
		}
	}
	switch {
	case sec-d.raisedAt >= ra && recent >= 3*ra:
		d.retryAfter, d.raisedAt = min(2*ra, maxRetryAfter), sec
	case recent < ra && ra > 1:
		d.retryAfter = ra - 1
	}
}
