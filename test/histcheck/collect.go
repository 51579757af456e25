package histcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/cluster"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCollect wraps every failure to read the history from etcd.
var ErrCollect = errors.New("histcheck: collect")

// Key prefixes below P = /clusterrebootd/<cluster>.
const (
	slotsDir   = "/slots/"
	lockDir    = "/lock/"
	historyDir = "/history/"
)

// Collect reads what etcd recorded under prefix (P, without a trailing
// slash) from revision from (>= 1) up to now: every change of the slot and
// mutex keys and every history record, as Events, and the final slot and
// mutex keys. The state before from is read too (as SourceSnapshot events),
// so from may be any revision the store still has; from = 1 replays the
// whole store.
func Collect(ctx context.Context, cli *clientv3.Client, prefix string, from int64) ([]Event, *Final, error) {
	if from < 1 {
		from = 1
	}
	prefix = strings.TrimSuffix(prefix, "/")
	now, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCollect, err)
	}
	end := now.Header.Revision
	fin := &Final{Rev: end}
	for _, kv := range now.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, prefix+slotsDir):
			fin.Slots = append(fin.Slots, strings.TrimPrefix(k, prefix+slotsDir))
		case strings.HasPrefix(k, prefix+lockDir):
			fin.Locks = append(fin.Locks, k)
		}
	}
	var evs []Event
	from = min(from, end+1)
	if from > 1 {
		before, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(from-1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: state at revision %d: %w", ErrCollect, from-1, err)
		}
		for _, kv := range before.Kvs {
			if e, ok := decode(prefix, kv, false); ok && e.Kind != Record {
				e.Rev, e.Source = from-1, SourceSnapshot
				evs = append(evs, e)
			}
		}
	}
	if from > end {
		return evs, fin, nil
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(from))
	// The last revisions may not touch the prefix: a progress notification
	// (sent once the watch caught up) says the watch is past end.
	go func() {
		for wctx.Err() == nil {
			_ = cli.RequestProgress(wctx)
			select {
			case <-wctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return nil, nil, fmt.Errorf("%w: watch from revision %d: %w", ErrCollect, from, err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > end {
				return evs, fin, nil
			}
			if e, ok := decode(prefix, ev.Kv, ev.Type == clientv3.EventTypeDelete); ok {
				evs = append(evs, e)
			}
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= end {
			return evs, fin, nil
		}
		if n := len(resp.Events); n > 0 && resp.Events[n-1].Kv.ModRevision >= end {
			return evs, fin, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: watch: %w", ErrCollect, err)
	}
	return evs, fin, nil
}

// decode turns one key change into an Event; ok false for keys the checker
// does not need (alive, members, …) and for deleted history records (their
// lease ended).
func decode(prefix string, kv *mvccpb.KeyValue, deleted bool) (Event, bool) {
	k := string(kv.Key)
	e := Event{Rev: kv.ModRevision, Source: "etcd"}
	switch {
	case strings.HasPrefix(k, prefix+slotsDir):
		e.Node = strings.TrimPrefix(k, prefix+slotsDir)
		if deleted {
			e.Kind = SlotDelete
			return e, true
		}
		e.Kind = SlotPut
		var s cluster.Slot
		if json.Unmarshal(kv.Value, &s) == nil {
			if kv.Version > 1 {
				s.ModRevision = kv.ModRevision // an update: its acquired_at is old
			}
			e.Slot, e.BootID = &s, s.BootID
		}
		return e, true
	case strings.HasPrefix(k, prefix+lockDir):
		e.Key = k
		if deleted {
			e.Kind = LockDelete
			return e, true
		}
		if kv.Version > 1 {
			return e, false // our mutex keys are written once
		}
		e.Kind, e.CreateRev = LockPut, kv.CreateRevision
		var a struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(kv.Value, &a) == nil {
			e.Node = a.Node
		}
		return e, true
	case strings.HasPrefix(k, prefix+historyDir) && !deleted:
		var h cluster.HistoryEvent
		if json.Unmarshal(kv.Value, &h) != nil {
			return e, false
		}
		h.Revision = kv.CreateRevision
		e.Kind, e.Node, e.History, e.BootID = Record, h.Node, &h, h.BootID
		return e, true
	}
	return e, false
}

// Settle waits (bounded by timeout) until no slot and no mutex key is left
// under prefix: killed holders' mutex keys go with their leases (lock.ttl).
// It returns the last Final it saw.
func Settle(ctx context.Context, cli *clientv3.Client, prefix string, timeout time.Duration) (*Final, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	deadline := time.Now().Add(timeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		slots, err1 := cli.Get(rctx, prefix+slotsDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		locks, err2 := cli.Get(rctx, prefix+lockDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err := errors.Join(err1, err2); err == nil {
			f := &Final{Rev: locks.Header.Revision}
			for _, kv := range slots.Kvs {
				f.Slots = append(f.Slots, strings.TrimPrefix(string(kv.Key), prefix+slotsDir))
			}
			for _, kv := range locks.Kvs {
				f.Locks = append(f.Locks, string(kv.Key))
			}
			if len(f.Slots) == 0 && len(f.Locks) == 0 || time.Now().After(deadline) {
				return f, nil
			}
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: settle: %w", ErrCollect, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
