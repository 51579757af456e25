package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxOSReleaseBytes bounds how much of the os-release file is read.
const maxOSReleaseBytes = 64 << 10

// ReadOSRelease reads at most 64 KiB of an os-release file.
func ReadOSRelease(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxOSReleaseBytes))
}

// runAuto reads the os-release file, resolves it (see Resolve) and runs the
// resulting detector with the auto spec's timeout.
func (s *Set) runAuto(ctx context.Context, sp Spec) Result {
	name := detectorName(sp)
	data, err := ReadOSRelease(s.osRelease)
	if err != nil {
		return unknown(name, s.osRelease, -1, fmt.Errorf("detect: %s: cannot read os-release: %w", name, err))
	}
	resolved, err := Resolve(data)
	if err != nil {
		if u, ok := errors.AsType[*UnsupportedOSError](err); ok {
			u.File = s.osRelease
		}
		return unknown(name, s.osRelease, -1, err)
	}
	resolved.Timeout = sp.Timeout
	return s.run(ctx, resolved)
}
