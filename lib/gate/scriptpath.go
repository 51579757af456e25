package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink resolution like the kernel's ELOOP limit.
const maxSymlinks = 40

// checkScriptPath walks path from "/" one component at a time, resolving
// symlinks itself, and returns the final target when every element on the
// way is safe (see the package documentation). uid is the owner trusted
// besides root; -1 trusts root only.
func checkScriptPath(path string, uid int) (string, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrScriptRefused, path, fmt.Sprintf(format, args...))
	}
	if !filepath.IsAbs(path) {
		return "", refuse("not an absolute path")
	}
	trusted := func(owner uint32) bool {
		return owner == 0 || (uid >= 0 && owner == uint32(uid))
	}
	lstat := func(p string) (fs.FileInfo, *syscall.Stat_t, error) {
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: %s: %s does not exist", ErrScriptMissing, path, p)
			}
			return nil, nil, refuse("%v", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, nil, refuse("%s: no ownership information", p)
		}
		if !trusted(st.Uid) {
			return nil, nil, refuse("%s is owned by uid %d, not by root%s", p, st.Uid, alsoUID(uid))
		}
		return fi, st, nil
	}
	checkDir := func(p string, fi fs.FileInfo) error {
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return refuse("directory %s is writable by group or others (mode %s)", p, fi.Mode().Perm())
		}
		return nil
	}

	cur := "/"
	fi, _, err := lstat(cur)
	if err != nil {
		return "", err
	}
	if err := checkDir(cur, fi); err != nil {
		return "", err
	}
	rest := components(path)
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			if fi, _, err = lstat(cur); err != nil { // keep fi describing cur
				return "", err
			}
			continue
		}
		next := filepath.Join(cur, c)
		nfi, _, err := lstat(next)
		if err != nil {
			return "", err
		}
		switch {
		case nfi.Mode()&fs.ModeSymlink != 0:
			hops++
			if hops > maxSymlinks {
				return "", refuse("too many levels of symbolic links")
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", refuse("%v", err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(components(target), rest...)
		case nfi.IsDir():
			if err := checkDir(next, nfi); err != nil {
				return "", err
			}
			cur, fi = next, nfi
		default:
			if len(rest) > 0 {
				return "", refuse("%s is not a directory", next)
			}
			cur, fi = next, nfi
		}
	}
	if !fi.Mode().IsRegular() {
		return "", refuse("%s is not a regular file (mode %s)", cur, fi.Mode())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return "", refuse("%s is writable by group or others (mode %s)", cur, fi.Mode().Perm())
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", refuse("%s is not executable (mode %s)", cur, fi.Mode().Perm())
	}
	return cur, nil
}

// components splits a path into its non-empty elements, keeping "." and
// ".." for the walk to interpret after symlinks are resolved.
func components(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func alsoUID(uid int) string {
	if uid < 0 {
		return ""
	}
	return fmt.Sprintf(" or uid %d", uid)
}
