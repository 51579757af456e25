package hostile

import (
	"strings"
	"testing"
)

// assertf fails the test with the message unless ok.
func assertf(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

// corruptCase is a value under the cluster prefix that does not decode.
type corruptCase struct {
	name  string
	key   string // relative to the prefix, e.g. "slots/n1"
	value string
}

func corruptCases() []corruptCase {
	return []corruptCase{
		{"own slot garbage", "slots/n1", "garbage"},
		{"own slot binary", "slots/n1", "\x00\x01\xff"},
		{"other slot garbage", "slots/n2", "{not json"},
		{"slot of another node's name", "slots/n2", `{"node":"n3","boot_id":"b","reason":"r","fence_revision":1,"acquired_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T01:00:00Z"}`},
		{"slot without deadline", "slots/n2", `{"node":"n2","boot_id":"b","reason":"r","fence_revision":1,"acquired_at":"2026-01-01T00:00:00Z"}`},
		{"slot with unknown field", "slots/n2", `{"node":"n2","boot_id":"b","reason":"r","fence_revision":1,"acquired_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T01:00:00Z","x":1}`},
		{"slot with trailing data", "slots/n2", `{"node":"n2","boot_id":"b","reason":"r","fence_revision":1,"acquired_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T01:00:00Z"} {}`},
		{"alive garbage", "alive/n2", "garbage"},
		{"alive huge", "alive/n2", `{"node":"` + strings.Repeat("x", 1<<20) + `"}`},
		{"alive with max_concurrent 0", "alive/n2", `{"node":"n2","boot_id":"b","kernel":"k","version":"v","state":"idle","detector":"file","healthy":true,"reboot_required":false,"max_concurrent":0,"updated_at":"2026-01-01T00:00:00Z"}`},
		{"member garbage", "members/n2", "garbage"},
		{"member empty", "members/n2", ""},
		{"member JSON null", "members/n2", "null"},
		{"pause garbage", "pause", "yes"},
		{"pause empty object", "pause", "{}"},
		{"settings garbage", "settings", "max=2"},
		{"settings max_concurrent 0", "settings", `{"max_concurrent":0}`},
		{"settings max_concurrent negative", "settings", `{"max_concurrent":-5}`},
		{"settings max_concurrent overflow", "settings", `{"max_concurrent":99999999999999999999}`},
		{"settings max_concurrent float", "settings", `{"max_concurrent":1.5}`},
		{"unknown key", "bogus", "x"},
		{"key below a record", "slots/n2/x", "x"},
		{"empty node segment", "members/", "x"},
	}
}

// testCorruptValues: a value under the prefix that does not decode must
// stop both check and status with a non-zero exit naming the key, and no
// reboot may happen.
func testCorruptValues(t *testing.T, endpoints []string) {
	for _, tc := range corruptCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, endpoints, nodeOpts{needsReboot: true})
			key := n.prefix + "/" + tc.key
			n.put(key, tc.value)
			for _, args := range [][]string{{"check", "--once"}, {"status"}, {"status", "--json"}, {"simulate"}} {
				r := n.run(args...)
				if r.code == exitOK {
					t.Errorf("%v: exit 0 with a corrupt %s", args, key)
				}
				expect(t, r, exitInternal, []string{"corrupt value at " + key + ":"})
				if len(r.out()) > 64<<10 {
					t.Errorf("%v: output of %d bytes: a corrupt value must not be echoed in full", args, len(r.out()))
				}
			}
			if k := n.reboots(); k != 0 {
				t.Errorf("rebooted %d time(s) with a corrupt %s", k, key)
			}
			if tc.key != "slots/n1" && n.hasSlot() {
				t.Errorf("took a slot with a corrupt %s", key)
			}
		})
	}
}

// testCorruptHistory: history is an audit trail, read only by status: a
// record that does not decode stops status (naming the key) but is not a
// decision input of check or hold.
func testCorruptHistory(t *testing.T, endpoints []string) {
	for _, tc := range []struct{ name, value string }{
		{"garbage", "garbage"},
		{"no time", `{"event":"slot-taken","node":"n1"}`},
		{"unknown event", `{"event":"nonsense","node":"n1","at":"2026-01-01T00:00:00Z"}`},
	} {
		value := tc.value
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, endpoints, nodeOpts{needsReboot: false})
			key := n.prefix + "/history/garbage"
			n.put(key, value)
			for _, args := range [][]string{{"status"}, {"status", "--json"}} {
				expect(t, n.run(args...), exitInternal, []string{"corrupt value at " + key + ":"})
			}
			expect(t, n.run("check", "--once"), exitOK, nil)
		})
	}
}

// testCorruptLockWaiter: any key under P/lock/ is a waiter of the cluster
// mutex (that is how `etcdctl lock P/lock` blocks all reboots), whatever its
// value; one with garbage in place of our annotation queues first and
// blocks every holder until max_hold_wait (exit 4), without a reboot.
func testCorruptLockWaiter(t *testing.T, endpoints []string) {
	for _, tc := range []struct{ name, value string }{
		{"garbage", "garbage"},
		{"empty", ""},
		{"node with a newline", `{"node":"n1\nforged","pid":-1}`},
		{"wrong type", `{"node":"n2","pid":"x"}`},
	} {
		value := tc.value
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, endpoints, nodeOpts{needsReboot: true})
			key := n.prefix + "/lock/694d00000000abcd"
			n.put(key, value)
			r := n.run("check", "--once")
			expect(t, r, exitBusy, []string{"max_hold_wait passed while waiting for the cluster lock"})
			assertf(t, strings.Contains(r.out(), key), "check does not name the lock key %s that blocks it", key)
			if n.reboots() != 0 || n.hasSlot() {
				t.Errorf("rebooted (%d) or took a slot (%v) behind a foreign lock waiter", n.reboots(), n.hasSlot())
			}
			st := n.run("status")
			expect(t, st, exitOK, []string{"queued for the cluster lock, position 2"}, "n1\nforged")
			assertf(t, strings.Contains(st.out(), key), "status does not name the lock key %s that owns the mutex", key)
			sim := n.run("simulate")
			assertf(t, sim.code == exitBusy, "simulate exits %d, but a real run exits %d behind the lock waiter %s", sim.code, exitBusy, key)
		})
	}
}
