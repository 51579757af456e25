package coordinator

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffCap(t *testing.T) {
	const s = time.Second
	tests := []struct {
		attempt  int
		min, max time.Duration
		want     time.Duration
	}{
		{1, 5 * s, 60 * s, 5 * s},
		{0, 5 * s, 60 * s, 5 * s}, // attempt < 1 behaves like the first
		{2, 5 * s, 60 * s, 10 * s},
		{3, 5 * s, 60 * s, 20 * s},
		{4, 5 * s, 60 * s, 40 * s},
		{5, 5 * s, 60 * s, 60 * s}, // 80s capped
		{6, 5 * s, 60 * s, 60 * s},
		{1000, 5 * s, 60 * s, 60 * s},           // saturates, no overflow
		{1000, 1, math.MaxInt64, math.MaxInt64}, // saturates at a huge cap without wrapping
		{3, 0, 60 * s, 4 * s},                   // min <= 0 defaults to 1s
		{1, -5 * s, 60 * s, 1 * s},
		{4, 10 * s, 5 * s, 10 * s}, // max < min: max = min
	}
	for _, tc := range tests {
		if got := backoffCap(tc.attempt, tc.min, tc.max); got != tc.want {
			t.Errorf("backoffCap(%d, %v, %v) = %v, want %v", tc.attempt, tc.min, tc.max, got, tc.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name     string
		min, max time.Duration
		floor    time.Duration
	}{
		{"5s..60s", 5 * s, 60 * s, 2500 * time.Millisecond},
		{"min = max", 4 * s, 4 * s, 2 * s},
		{"max below min", 4 * s, time.Second, 2 * s},
		{"min zero defaults to 1s", 0, 10 * s, 500 * time.Millisecond},
		{"min negative defaults to 1s", -3 * s, 10 * s, 500 * time.Millisecond},
		{"tiny min", 1, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 1; attempt <= 12; attempt++ {
				ceil := backoffCap(attempt, tc.min, tc.max)
				seenLow, seenHigh := false, false
				for range 2000 {
					d := backoff(attempt, tc.min, tc.max)
					if d < tc.floor || d > ceil {
						t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, d, tc.floor, ceil)
					}
					mid := tc.floor + (ceil-tc.floor)/2
					seenLow = seenLow || d <= mid
					seenHigh = seenHigh || d >= mid
				}
				// Full jitter: both halves of the range occur.
				if !seenLow || !seenHigh {
					t.Errorf("attempt %d: no spread over [%v, %v]", attempt, tc.floor, ceil)
				}
			}
		})
	}
}

func TestSleepCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleepCtx(t.Context(), 3*time.Second); err != nil || time.Since(start) != 3*time.Second {
			t.Errorf("sleep: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("cancelled sleep: %v after %v", err, time.Since(start))
		}
	})
}
