package coordinator

import "testing"

// The waiting line names this holder's place in the mutex queue. The queue
// is read while Lock queues, so the read may already contain our own entry:
// then only the waiters ahead of it count.
func TestHoldAnnouncesQueuePosition(t *testing.T) {
	tests := []struct {
		name    string
		foreign []Waiter
		want    string
	}{
		{"queue empty", nil, "queued for the cluster lock, position 1"},
		{"one ahead", []Waiter{{Node: "n2"}}, "queued for the cluster lock, position 2, held by n2"},
		{"own entry already visible", []Waiter{{Node: "n2"}, {Node: "n3"}, {Node: self}, {Node: "n4"}},
			"queued for the cluster lock, position 3, held by n2"},
		{"anonymous owner", []Waiter{{Key: "/clusterrebootd/c/lock/abc"}},
			"queued for the cluster lock, position 2, held by a lock without a node name at /clusterrebootd/c/lock/abc, e.g. `etcdctl lock`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := holdEnv()
			e.cl.foreign = tt.foreign
			if err := e.coord(t).Hold(t.Context()); err != nil {
				t.Fatalf("Hold: %v", err)
			}
			pub := e.cl.publishes()
			if len(pub) == 0 || pub[0].State != StateWaiting || pub[0].Blocked != tt.want {
				t.Fatalf("first alive = %+v, want waiting %q", pub, tt.want)
			}
		})
	}
}
