package coordinator

import (
	"reflect"
	"testing"
	"time"
)

func TestGroupReboots(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ev := func(event, node string, m int, mod ...func(*HistoryEvent)) HistoryEvent {
		e := HistoryEvent{Event: event, Node: node, Reason: "kernel", BootID: "b-" + node, At: at(m)}
		for _, f := range mod {
			f(&e)
		}
		return e
	}
	by := func(who, why string) func(*HistoryEvent) {
		return func(e *HistoryEvent) { e.By, e.Reason = who, why }
	}
	min := func(m int) int64 { return (time.Duration(m) * time.Minute).Milliseconds() }
	tests := []struct {
		name   string
		events []HistoryEvent
		want   []Reboot
	}{
		{"none", nil, nil},
		{
			"completed: down from the request to the release",
			[]HistoryEvent{ev(EventSlotTaken, "a", 0), ev(EventRebootRequested, "a", 1),
				ev(EventCompleted, "a", 15, func(e *HistoryEvent) { e.DurationMS = min(15); e.BootID = "b-new" })},
			[]Reboot{{Node: "a", Reason: "kernel", BootID: "b-a", SlotTakenAt: at(0), RequestedAt: at(1), EndedAt: at(15),
				DurationMS: min(14), Result: ResultRebooted, Detail: "kernel"}},
		},
		{
			"interleaved nodes, each ending its own way, ordered by start",
			[]HistoryEvent{
				ev(EventSlotTaken, "b", 2), ev(EventSlotTaken, "a", 0), ev(EventRebootRequested, "b", 3),
				ev(EventReleased, "b", 40, by("alice", "released by operator: kernel")),
				ev(EventDryRun, "a", 1, by("", "dry run: kernel")),
				ev(EventSlotTaken, "c", 50), ev(EventExpired, "c", 90, by("a", "overdue since …: kernel")),
				ev(EventSlotTaken, "d", 60), ev(EventAborted, "d", 61, by("", "cannot write the marker")),
				ev(EventSlotTaken, "e", 70), ev(EventRebootRequested, "e", 70), ev(EventRebootFailed, "e", 70, by("", "refused")),
			},
			[]Reboot{
				{Node: "a", Reason: "kernel", BootID: "b-a", SlotTakenAt: at(0), EndedAt: at(1), DurationMS: min(1), Result: ResultDryRun, Detail: "dry run: kernel"},
				{Node: "b", Reason: "kernel", BootID: "b-b", SlotTakenAt: at(2), RequestedAt: at(3), EndedAt: at(40), DurationMS: min(37),
					Result: ResultReleased, By: "alice", Detail: "released by operator: kernel"},
				{Node: "c", Reason: "kernel", BootID: "b-c", SlotTakenAt: at(50), EndedAt: at(90), DurationMS: min(40), Result: ResultExpired, By: "a", Detail: "overdue since …: kernel"},
				{Node: "d", Reason: "kernel", BootID: "b-d", SlotTakenAt: at(60), EndedAt: at(61), DurationMS: min(1), Result: ResultAborted, Detail: "cannot write the marker"},
				{Node: "e", Reason: "kernel", BootID: "b-e", SlotTakenAt: at(70), RequestedAt: at(70), EndedAt: at(70), Result: ResultRebootFailed, Detail: "refused"},
			},
		},
		{
			"start before the range: the completed record's own duration",
			[]HistoryEvent{ev(EventCompleted, "a", 30, func(e *HistoryEvent) { e.DurationMS = min(12) })},
			[]Reboot{{Node: "a", Reason: "kernel", BootID: "b-a", EndedAt: at(30), DurationMS: min(12), Result: ResultRebooted, Detail: "kernel"}},
		},
		{
			"in progress, and a lost end before a new slot",
			[]HistoryEvent{ev(EventSlotTaken, "a", 0), ev(EventSlotTaken, "a", 100), ev(EventRebootRequested, "a", 101),
				ev(EventRebootRequested, "b", 5)},
			[]Reboot{
				{Node: "a", Reason: "kernel", BootID: "b-a", SlotTakenAt: at(0), Result: ResultUnknown},
				{Node: "b", Reason: "kernel", BootID: "b-b", RequestedAt: at(5), Result: ResultInProgress},
				{Node: "a", Reason: "kernel", BootID: "b-a", SlotTakenAt: at(100), RequestedAt: at(101), Result: ResultInProgress},
			},
		},
		{
			"a second request without an end starts another reboot",
			[]HistoryEvent{ev(EventRebootRequested, "a", 0), ev(EventRebootRequested, "a", 5), ev(EventCompleted, "a", 9)},
			[]Reboot{
				{Node: "a", Reason: "kernel", BootID: "b-a", RequestedAt: at(0), Result: ResultUnknown},
				{Node: "a", Reason: "kernel", BootID: "b-a", RequestedAt: at(5), EndedAt: at(9), DurationMS: min(4), Result: ResultRebooted, Detail: "kernel"},
			},
		},
		{
			"clock skew never gives a negative duration; unknown events are skipped",
			[]HistoryEvent{ev(EventRebootRequested, "a", 10), {Event: "future-kind", Node: "a", At: at(11)}, ev(EventCompleted, "a", 9)},
			[]Reboot{{Node: "a", Reason: "kernel", BootID: "b-a", RequestedAt: at(10), EndedAt: at(9), Result: ResultRebooted, Detail: "kernel"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := GroupReboots(tc.events)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GroupReboots =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestRebootHistory(t *testing.T) {
	e := newEnv()
	e.cl.history = []HistoryEvent{
		{Event: EventSlotTaken, Node: "n2", At: t0.Add(-3 * time.Hour)},
		{Event: EventCompleted, Node: "n2", At: t0.Add(-2 * time.Hour)},
		{Event: EventSlotTaken, Node: "n3", At: t0.Add(-time.Hour)},
	}
	got, err := e.coord(t).RebootHistory(t.Context(), "n2", t0.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Node != "n2" || got[0].Result != ResultRebooted || got[0].DurationMS != time.Hour.Milliseconds() {
		t.Errorf("reboots = %+v", got)
	}
	if !e.cl.historySince.Equal(t0.Add(-24 * time.Hour)) {
		t.Errorf("since = %v", e.cl.historySince)
	}
	if n := len(e.rec.only(mutating...)); n != 0 {
		t.Errorf("history wrote: %v", e.rec.list())
	}
	e.cl.historyErr = unavailable("range")
	_, err = e.coord(t).RebootHistory(t.Context(), "", time.Time{})
	wantErr(t, err, CodeEtcd, "etcd")
}
