package detect

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// ParseOSRelease parses os-release(5) content: KEY=VALUE lines, values
// unquoted, "double quoted" (with \" \\ \$ \` escapes) or 'single quoted'.
// Blank lines, comments and malformed lines (bad key, unterminated quote)
// are skipped; a later assignment wins. It never fails.
func ParseOSRelease(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), len(b)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, raw, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !validKey(key) {
			continue
		}
		val, ok := unquote(strings.TrimSpace(raw))
		if !ok {
			continue
		}
		m[key] = val
	}
	return m
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// unquote decodes one shell-style value; ok is false for an unterminated
// quote.
func unquote(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	switch s[0] {
	case '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
				i++
				b.WriteByte(s[i])
			case c == '"':
				return b.String(), true
			default:
				b.WriteByte(c)
			}
		}
		return "", false
	case '\'':
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", false
		}
		return s[1 : 1+end], true
	}
	// Unquoted values cannot contain blanks; anything after one (such as a
	// trailing comment) is not part of the value.
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		s = s[:i]
	}
	return s, true
}

// OS families "auto" knows.
const (
	FamilyDebian = "debian"
	FamilyRHEL   = "rhel"
	FamilySUSE   = "suse"
)

// familyOf maps an os-release ID or ID_LIKE word to a family, or "".
func familyOf(id string) string {
	switch {
	case id == "debian", id == "ubuntu":
		return FamilyDebian
	case id == "rhel", id == "fedora", id == "centos", id == "almalinux", id == "rocky", id == "ol":
		return FamilyRHEL
	case id == "suse", id == "sles", id == "sled", strings.HasPrefix(id, "opensuse"):
		return FamilySUSE
	}
	return ""
}

// UnsupportedOSError is the error of Resolve (and of an "auto" result) for
// an operating system "auto" does not know. It matches ErrUnsupportedOS.
type UnsupportedOSError struct {
	File   string // os-release path; empty when unknown (Resolve)
	ID     string
	IDLike string
}

func (e *UnsupportedOSError) Error() string {
	where := ""
	if e.File != "" {
		where = " in " + e.File
	}
	return fmt.Sprintf("%s: ID=%q ID_LIKE=%q%s (supported: debian, ubuntu, rhel family, suse family; configure a detector explicitly)",
		ErrUnsupportedOS, e.ID, e.IDLike, where)
}

// Is reports whether target is ErrUnsupportedOS.
func (e *UnsupportedOSError) Is(target error) bool { return target == ErrUnsupportedOS }

// Resolve tells what "auto" means for the given os-release content. It is
// pure: it reads and runs nothing. The returned Spec has Name
// "auto:<family>" and no Timeout:
//   - debian, ubuntu (or ID_LIKE containing one): file /run/reboot-required;
//   - rhel, fedora, centos, almalinux, rocky, ol: command
//     needs-restarting -r, 1 needed, 0 not needed;
//   - suse, sles, sled, opensuse*: command zypper needs-rebooting,
//     102 needed, 0 not needed.
//
// ID is tried first, then the ID_LIKE words in order (so a derivative with
// ID_LIKE="rhel fedora" or "suse" is covered). Anything else is an
// *UnsupportedOSError.
func Resolve(osRelease []byte) (Spec, error) {
	m := ParseOSRelease(osRelease)
	id := strings.ToLower(m["ID"])
	idLike := strings.ToLower(m["ID_LIKE"])
	fam := familyOf(id)
	for _, w := range strings.Fields(idLike) {
		if fam != "" {
			break
		}
		fam = familyOf(w)
	}
	switch fam {
	case FamilyDebian:
		return Spec{Type: TypeFile, Name: "auto:" + fam, Path: "/run/reboot-required"}, nil
	case FamilyRHEL:
		return Spec{Type: TypeCommand, Name: "auto:" + fam, Cmd: []string{"needs-restarting", "-r"},
			NeededExitCodes: []int{1}, NotNeededExitCodes: []int{0}}, nil
	case FamilySUSE:
		return Spec{Type: TypeCommand, Name: "auto:" + fam, Cmd: []string{"zypper", "needs-rebooting"},
			NeededExitCodes: []int{102}, NotNeededExitCodes: []int{0}}, nil
	}
	return Spec{}, &UnsupportedOSError{ID: m["ID"], IDLike: m["ID_LIKE"]}
}
