package cluster

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var fastSeeds = []string{
	`{"node":"n1","boot_id":"b","kernel":"k","version":"v","state":"idle","detector":"file","healthy":true,"reboot_required":false,"max_concurrent":1,"updated_at":"2026-01-01T00:00:00Z"}`,
	`{"node":"n1","boot_id":"b","kernel":"k","version":"v","state":"waiting","detector":"file","reason":"r","blocked":"queued, position 3","healthy":false,"reboot_required":true,"max_concurrent":5,"updated_at":"2026-01-01T00:00:00.123456789+02:00"}`,
	`{"node":"n1","registered_at":"2026-01-01T00:00:00Z"}`,
	`{"node":"n1","pid":7,"boot_id":"b","queued_at":"2026-01-01T00:00:00Z"}`,
	`{"node":"n1","node":"n2"}`, `{"Node":"n1"}`, `{"node":"n\u00e91"}`, `{"node":"n1" }`, `{"node":"n1"} `,
	`{"max_concurrent":-0}`, `{"max_concurrent":01}`, `{"max_concurrent":1e2}`, `{"max_concurrent":99999999999999999999}`,
	`{"healthy":null}`, `{"healthy":"true"}`, `{"node":"a,b}"}`, `{"node":"é"}`, "{\"node\":\"\xff\"}",
	`{"updated_at":"2026-13-01T00:00:00Z"}`, `{"updated_at":"2026-01-01 00:00:00Z"}`, `{"pid":-1}`, `{,}`, `{"a":}`, `{}`,
}

// FuzzFastDecode: whatever the fast path accepts, the strict decoder
// accepts too, with exactly the same record; and the decoders give the same
// answer as a strict-only decode (same record, or the same error).
func FuzzFastDecode(f *testing.F) {
	for _, s := range append(fastSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if a, ok := fastAlive(data); ok {
			var want Alive
			if err := strictUnmarshal(data, &want); err != nil || !reflect.DeepEqual(a, want) {
				t.Fatalf("alive %q: fast %+v, strict %+v (%v)", data, a, want, err)
			}
		}
		if m, ok := fastMember(data); ok {
			var want Member
			if err := strictUnmarshal(data, &want); err != nil || !reflect.DeepEqual(m, want) {
				t.Fatalf("member %q: fast %+v, strict %+v (%v)", data, m, want, err)
			}
		}
		if a, ok := fastAnnotation(data); ok {
			var want lockAnnotation
			if err := strictUnmarshal(data, &want); err != nil || !reflect.DeepEqual(a, want) {
				t.Fatalf("annotation %q: fast %+v, strict %+v (%v)", data, a, want, err)
			}
		}
		// The decoders as a whole: the same as the strict path alone.
		got, gerr := decodeAlive(fuzzKey, "n1", data)
		var want Alive
		werr := strictUnmarshal(data, &want)
		if werr == nil {
			werr = want.validate("n1")
		}
		if (gerr == nil) != (werr == nil) || (gerr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decodeAlive %q = %+v, %v; strict %+v, %v", data, got, gerr, want, werr)
		}
		if gerr != nil && !strings.HasSuffix(gerr.Error(), werr.Error()) {
			t.Fatalf("decodeAlive %q error %q, strict %q", data, gerr, werr)
		}
	})
}

func TestFastDecode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	a := Alive{Node: "n1", BootID: "b", Kernel: "6.1", Version: "v", State: StateBlocked, Detector: "file", Reason: "r", Blocked: "x, y: z",
		Healthy: true, RebootRequired: true, MaxConcurrent: 3, UpdatedAt: at}
	m := Member{Node: "n1", RegisteredAt: at}
	l := lockAnnotation{Node: "n1", PID: 42, BootID: "b", QueuedAt: at}
	enc := func(v any) []byte {
		s, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	if got, ok := fastAlive(enc(a)); !ok || !reflect.DeepEqual(got, a) {
		t.Errorf("fastAlive(encode(a)) = %+v, %v", got, ok)
	}
	if got, ok := fastMember(enc(m)); !ok || !reflect.DeepEqual(got, m) {
		t.Errorf("fastMember(encode(m)) = %+v, %v", got, ok)
	}
	if got, ok := fastAnnotation(enc(l)); !ok || !reflect.DeepEqual(got, l) {
		t.Errorf("fastAnnotation(encode(l)) = %+v, %v", got, ok)
	}
	// Declined: left to the strict decoder, whose errors name the key.
	for _, bad := range []string{
		`{"node":"n1","x":1}`, `{"node":"n1"} {}`, `{"node":"n1","node":"n1"}`, ` {"node":"n1"}`, `{"node":"n\"1"}`,
		`{"max_concurrent":1.0}`, `{"healthy":1}`, `{"node":1}`, `{"updated_at":"yesterday"}`, `{"node":"n1"`, `{`, `{"node"}`,
	} {
		if _, ok := fastAlive([]byte(bad)); ok {
			t.Errorf("fastAlive accepted %s", bad)
		}
	}
	_, err := decodeAlive("/p/alive/n1", "n1", []byte(`{"node":"n1","x":1}`))
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Key != "/p/alive/n1" || !strings.Contains(err.Error(), `unknown field "x"`) {
		t.Errorf("unknown field: %v", err)
	}
	if w := decodeLockWaiter("/p/lock/1", 5, 7, enc(l)); w.Node != "n1" || w.PID != 42 || !w.QueuedAt.Equal(at) {
		t.Errorf("waiter = %+v", w)
	}
	if w := decodeLockWaiter("/p/lock/1", 5, 7, []byte(`{"node":"n1","pid":-3}`)); w.Node != "" {
		t.Errorf("waiter with a bogus pid = %+v", w)
	}
}
