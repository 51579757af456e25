package obs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// ErrCorruptState is wrapped by ReadJSON when a file exists but cannot be
// used: it is larger than allowed or is not valid JSON for the target.
var ErrCorruptState = errors.New("obs: corrupt state file")

// WriteFileAtomic replaces path with data. The data goes to a new temporary
// file in the same directory (created with O_EXCL under a random name), is
// written, fsynced and given perm, and is then renamed over path; finally the
// directory is fsynced so the rename survives a crash. On any error before
// the rename the temporary file is removed and path is untouched, so path
// holds either its old content or all of data, never a mix.
//
// The new file belongs to the calling user whatever owned the old one, and a
// symlink at path is replaced, not followed.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("obs: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close() // may already be closed; the error is not news
			_ = os.Remove(tmp)
			err = fmt.Errorf("obs: write %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	// Chmod on the descriptor: perm exactly, whatever the umask.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// From here on the new content is in place; the temp name is gone.
	if derr := syncDir(dir); derr != nil {
		return fmt.Errorf("obs: write %s: sync directory: %w", path, derr)
	}
	return nil
}

// syncDir fsyncs a directory so a rename in it is durable. File systems that
// cannot sync directories (EINVAL) are accepted: there is nothing to wait for.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if errors.Is(err, syscall.EINVAL) {
		err = nil
	}
	return errors.Join(err, d.Close())
}

// WriteJSONAtomic writes v as indented JSON (with a final newline) to path
// through WriteFileAtomic.
func WriteJSONAtomic(path string, v any, perm os.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("obs: encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, append(data, '\n'), perm)
}

// ErrUnreadable is wrapped by ReadFileBounded for a file that is not a
// regular file or is larger than the bound: its content cannot be trusted.
var ErrUnreadable = errors.New("obs: not a readable regular file")

// ReadFileBounded reads the regular file at path, at most maxBytes (which
// must be positive). It never blocks on a FIFO put in the file's place and
// never reads a device without end: either is an error wrapping
// ErrUnreadable, as is a file larger than maxBytes. A missing file is an
// error wrapping fs.ErrNotExist.
func ReadFileBounded(path string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("obs: read %s: maxBytes must be positive, got %d", path, maxBytes)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("obs: read %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("obs: read %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file (%s)", ErrUnreadable, path, fi.Mode().Type())
	}
	limit := maxBytes
	if limit < math.MaxInt64 {
		limit++ // one byte more tells "exactly maxBytes" from "too large"
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("obs: read %s: %w", path, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrUnreadable, path, maxBytes)
	}
	return data, nil
}

// ReadJSON decodes the JSON file at path into v, reading it with
// ReadFileBounded. A missing file is an error wrapping fs.ErrNotExist; a
// file that is not a regular file, is larger than maxBytes or does not
// decode into v is an error wrapping ErrCorruptState that names the file.
// Other read errors are returned as they are.
func ReadJSON(path string, v any, maxBytes int64) error {
	data, err := ReadFileBounded(path, maxBytes)
	if errors.Is(err, ErrUnreadable) {
		return fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptState, path, err)
	}
	return nil
}
