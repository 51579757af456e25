package detect

import "testing"

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"6.1.0-18-amd64", "6.1.0-21-amd64", -1},
		{"6.1.0-9", "6.1.0-10", -1},
		{"6.1.0-9-amd64", "6.1.0-10-amd64", -1},
		{"5.14.0-362.8.1.el9_3.x86_64", "5.14.0-427.13.1.el9_4.x86_64", -1},
		{"5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9_4.x86_64", 0},
		{"5.14.0-427.el9", "5.14.0-427.13.1.el9", -1}, // "el" letters < 13 number
		{"6.8.0-31-generic", "6.8.0-35-generic", -1},
		{"6.1.0-31-amd64", "6.12.38+deb13-amd64", -1},
		{"6.4.0-150600.21-default", "6.4.0-150600.23.7-default", -1},
		{"1.0", "1.0.1", -1},
		{"1.0", "1.0a", -1},
		{"1.0a", "1.0.1", -1},
		{"1.01", "1.1", 0},
		{"1.0", "1..0", 0},
		{"a", "b", -1},
		{"abc", "abd", -1},
		{"10", "9", 1},
		{"100000000000000000000001", "100000000000000000000000", 1},
		{"1.0~rc1", "1.0", -1},
		{"1.0~rc1", "1.0~rc2", -1},
		{"1.0~~", "1.0~", -1},
		{"1.0", "1.0^git1", -1},
		{"1.0^git1", "1.0.1", -1},
		{"1.0^git1", "1.0^git2", -1},
		{"1.0^", "1.0", 1},
		{"", "", 0},
		{"", "1", -1},
		{"", "~", 1},
		{"1_2", "1.2", 0},
		{"1.ä", "1", 0},
		{"1b", "1.b", 0},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d (antisymmetry)", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestNewestKernel(t *testing.T) {
	for _, tc := range []struct {
		running   string
		installed []string
		want      string
	}{
		{"6.1.0-18-amd64", []string{"6.1.0-21-amd64", "6.1.0-9-amd64", "6.1.0-18-amd64"}, "6.1.0-21-amd64"},
		// Equal by comparison: the choice is deterministic whatever the order.
		{"1.0", []string{"1.01", "1.1"}, "1.1"},
		{"1.0", []string{"1.1", "1.01"}, "1.1"},
	} {
		if got := NewestKernel(tc.running, tc.installed); got != tc.want {
			t.Errorf("NewestKernel(%q, %q) = %q, want %q", tc.running, tc.installed, got, tc.want)
		}
	}
}
