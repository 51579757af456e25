package coordinator

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoffCap is the exponential ceiling for attempt n (1-based):
// min·2^(n-1), capped at max.
func backoffCap(attempt int, min, max time.Duration) time.Duration {
	min = backoffMin(min)
	if max < min {
		max = min
	}
	d := min
	for i := 1; i < attempt && d < max; i++ {
		if d > max/2 { // doubling would pass max (or overflow)
			return max
		}
		d *= 2
	}
	return d
}

// backoffMin is min, or 1s when min is not positive.
func backoffMin(min time.Duration) time.Duration {
	if min <= 0 {
		return time.Second
	}
	return min
}

// backoff is "full jitter": uniform in [min/2, cap]. The floor of min/2 keeps
// a busy cluster from being hammered by zero-length sleeps.
func backoff(attempt int, min, max time.Duration) time.Duration {
	ceil := backoffCap(attempt, min, max)
	floor := backoffMin(min) / 2
	if ceil <= floor {
		return ceil
	}
	return floor + rand.N(ceil-floor+1)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
