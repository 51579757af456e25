package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrLockLost means the fenced write failed because this session no longer
	// owns the mutex (lease expired or revoked, key deleted, partition). The
	// holder must not reboot.
	ErrLockLost = errors.New("cluster: lock lost")
	// ErrConflict means a guarded transaction lost against another writer:
	// the key's ModRevision changed, or the slot already exists.
	ErrConflict = errors.New("cluster: concurrent modification")
	// ErrCorrupt is matched by every *CorruptError.
	ErrCorrupt = errors.New("cluster: corrupt value")
	// ErrUnavailable wraps timeouts, refused connections, "no leader" and
	// expired request deadlines. The cause's text is kept.
	ErrUnavailable = errors.New("cluster: etcd unavailable")
	// ErrAuth wraps etcd's authentication and permission errors (wrong user
	// or password, permission denied, invalid token). The cause's text is
	// kept. It never means "allowed": a caller must not reboot on it.
	ErrAuth = errors.New("cluster: etcd access denied")
	// ErrSlotHeld is returned by Forget for a node that holds a slot.
	ErrSlotHeld = errors.New("cluster: node holds a slot")
	// ErrInvalid is returned when a record to be written would not pass the
	// strict decoding of readers (so nothing ever writes what it cannot read).
	ErrInvalid = errors.New("cluster: invalid record")
)

// CorruptError reports a value under the cluster prefix that does not decode
// strictly. Key is the full etcd key. errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Key string
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("cluster: corrupt value at %s: %v", safeKey(e.Key), e.Err)
}

// safeKey prints a key as is when it is short, printable ASCII, and quoted
// and clipped otherwise: a hostile key must not forge or flood output.
func safeKey(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return strconv.Quote(clip(k))
		}
	}
	if len(k) > 128 {
		return strconv.Quote(clip(k))
	}
	return k
}

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(key string, format string, args ...any) error {
	return &CorruptError{Key: key, Err: fmt.Errorf(format, args...)}
}

// classify turns an etcd client error of the operation op into one of the
// package's errors. ctx is the caller's context (not the per-request child):
// a caller's cancellation is returned as such, not as unavailability.
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAuth) || errors.Is(err, ErrLockLost) ||
		errors.Is(err, ErrConflict) || errors.Is(err, ErrCorrupt) {
		return err // already ours
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("cluster: %s: %w", op, err)
		}
		return fmt.Errorf("cluster: %s: %w (%w)", op, ctx.Err(), err)
	}
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return fmt.Errorf("%w: %s: etcd is out of space (its quota-backend-bytes is reached; "+
			"compact, defragment and `etcdctl alarm disarm`): %w", ErrUnavailable, op, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	if isAuth(err) {
		return fmt.Errorf("%w: %s: %w", ErrAuth, op, err)
	}
	if errors.Is(err, concurrency.ErrSessionExpired) {
		return fmt.Errorf("%w: %s: %w", ErrLockLost, op, err)
	}
	return fmt.Errorf("cluster: %s: %w", op, err)
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return true
	}
	switch grpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.ResourceExhausted:
		return errors.Is(err, rpctypes.ErrTooManyRequests)
	}
	return false
}

func isAuth(err error) bool {
	if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrAuthOldRevision) ||
		errors.Is(err, rpctypes.ErrUserEmpty) {
		return true
	}
	switch grpcCode(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// grpcCode finds the gRPC code of err: etcd's typed errors first, then a raw
// gRPC status anywhere in the chain.
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	type grpcStatus interface{ GRPCStatus() *status.Status }
	var gs grpcStatus
	if errors.As(err, &gs) {
		return gs.GRPCStatus().Code()
	}
	return codes.OK
}
