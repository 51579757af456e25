package cluster

import (
	"errors"
	"reflect"
	"testing"
)

const fuzzKey = "/clusterrebootd/f/x"

var fuzzSeeds = []string{
	``, `null`, `{}`, `[]`, `"x"`, `{"node":"n1"}`, `{} {}`, "\x00\xff", `{"node":"n1","x":1}`,
	`{"node":"n1","registered_at":"2026-01-01T00:00:00Z"}`,
	`{"node":"n1","boot_id":"b","reason":"r","fence_revision":3,"acquired_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:30:00Z","healthy_since":"2026-01-01T00:10:00Z"}`,
	`{"node":"n1","boot_id":"b","kernel":"k","version":"v","state":"idle","detector":"file","healthy":true,"reboot_required":false,"max_concurrent":1,"updated_at":"2026-01-01T00:00:00Z"}`,
	`{"reason":"r","by":"b","at":"2026-01-01T00:00:00Z"}`,
	`{"max_concurrent":2}`, `{"max_concurrent":0}`,
	`{"event":"completed","node":"n1","at":"2026-01-01T00:00:00Z","duration_ms":5}`,
	`{"node":"n1","pid":7,"boot_id":"b","queued_at":"2026-01-01T00:00:00Z"}`,
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
}

// checkDecode asserts the decoder contract: an error is a *CorruptError for
// the key; a success is a valid record that survives an encode/decode round
// trip unchanged.
func checkDecode[T any](t *testing.T, got T, err error, validate func(T) error, decode func([]byte) (T, error)) {
	t.Helper()
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != fuzzKey || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not a CorruptError for %s", err, fuzzKey)
		}
		return
	}
	if verr := validate(got); verr != nil {
		t.Fatalf("decoded an invalid record %+v: %v", got, verr)
	}
	enc, eerr := encode(got)
	if eerr != nil {
		t.Fatalf("re-encode %+v: %v", got, eerr)
	}
	again, derr := decode([]byte(enc))
	if derr != nil {
		t.Fatalf("round trip of %s: %v", enc, derr)
	}
	if !reflect.DeepEqual(normalize(again), normalize(got)) {
		t.Fatalf("round trip changed %+v into %+v", got, again)
	}
}

// normalize strips monotonic/location differences that JSON cannot keep.
func normalize(v any) string {
	s, _ := encode(v)
	return s
}

func FuzzDecodeSlot(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (Slot, error) { return decodeSlot(fuzzKey, "n1", b, 9) }
		s, err := dec(data)
		checkDecode(t, s, err, func(s Slot) error { return s.validate("n1") }, dec)
		if err == nil && s.ModRevision != 9 {
			t.Fatalf("ModRevision %d, want 9", s.ModRevision)
		}
	})
}

func FuzzDecodeAlive(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (Alive, error) { return decodeAlive(fuzzKey, "n1", b) }
		a, err := dec(data)
		checkDecode(t, a, err, func(a Alive) error { return a.validate("n1") }, dec)
	})
}

func FuzzDecodeMember(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (Member, error) { return decodeMember(fuzzKey, "n1", b) }
		m, err := dec(data)
		checkDecode(t, m, err, func(m Member) error { return m.validate("n1") }, dec)
	})
}

func FuzzDecodePause(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (Pause, error) { return decodePause(fuzzKey, b) }
		p, err := dec(data)
		checkDecode(t, p, err, Pause.validate, dec)
	})
}

func FuzzDecodeSettings(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (Settings, error) { return decodeSettings(fuzzKey, b) }
		s, err := dec(data)
		checkDecode(t, s, err, Settings.validate, dec)
	})
}

func FuzzDecodeHistory(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(b []byte) (HistoryEvent, error) { return decodeHistory(fuzzKey, b, 11) }
		h, err := dec(data)
		checkDecode(t, h, err, HistoryEvent.validate, dec)
		if err == nil && h.Revision != 11 {
			t.Fatalf("Revision %d, want 11", h.Revision)
		}
	})
}

func FuzzDecodeLockWaiter(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		w := decodeLockWaiter(fuzzKey, 5, 6, data)
		if w.Key != fuzzKey || w.CreateRevision != 5 || w.Lease != 6 {
			t.Fatalf("waiter %+v lost its key, revision or lease", w)
		}
		if w.Node == "" && (w.PID != 0 || w.BootID != "" || !w.QueuedAt.IsZero()) {
			t.Fatalf("anonymous waiter with annotation fields: %+v", w)
		}
		if w.Node != "" {
			// Annotated: re-encoding the annotation gives the same waiter.
			enc, err := encode(lockAnnotation{Node: w.Node, PID: w.PID, BootID: w.BootID, QueuedAt: w.QueuedAt})
			if err != nil {
				t.Fatal(err)
			}
			if again := decodeLockWaiter(fuzzKey, 5, 6, []byte(enc)); normalize(again) != normalize(w) {
				t.Fatalf("round trip changed %+v into %+v", w, again)
			}
		}
	})
}

func TestDecodeLockWaiter(t *testing.T) {
	for _, tc := range []struct {
		val  string
		node string
	}{
		{``, ""},
		{`not json`, ""},
		{`{"node":"n1","pid":3,"boot_id":"b","queued_at":"2026-01-01T00:00:00Z"}`, "n1"},
		{`{"node":"n1","pid":3,"extra":true}`, ""},
		{`{"node":""}`, ""},
	} {
		w := decodeLockWaiter("k", 1, 2, []byte(tc.val))
		if w.Node != tc.node || w.Key != "k" || w.CreateRevision != 1 || w.Lease != 2 {
			t.Errorf("decodeLockWaiter(%q) = %+v, want node %q", tc.val, w, tc.node)
		}
	}
}
