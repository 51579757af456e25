package detect

import (
	"errors"
	"testing"
)

func FuzzResolve(f *testing.F) {
	for _, s := range []string{osDebian12, osUbuntu2404, osRHEL9, osRocky9, osAlma9, osFedora40, osLeap156, osSLES15,
		osArch, osMint, "", "ID=\"unterminated\n", "X='a'\nID=\\\"\n", "ID=\"a\\\"b\"  # c\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := ParseOSRelease(data)
		for k := range m {
			if !validKey(k) {
				t.Fatalf("invalid key %q parsed", k)
			}
		}
		spec, err := Resolve(data)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedOS) {
				t.Fatalf("Resolve error %v is not ErrUnsupportedOS", err)
			}
			return
		}
		if _, err := New(Options{Specs: []Spec{spec}}); err != nil {
			t.Fatalf("resolved spec %+v does not validate: %v", spec, err)
		}
	})
}

func FuzzCompareVersions(f *testing.F) {
	for _, p := range [][2]string{
		{"6.1.0-18-amd64", "6.1.0-21-amd64"},
		{"5.14.0-362.8.1.el9_3.x86_64", "5.14.0-427.13.1.el9_4.x86_64"},
		{"1.0~rc1", "1.0^git1"},
		{"", "~"},
		{"1a", "1.a"},
		{"007", "7"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := CompareVersions(a, b), CompareVersions(b, a)
		if ab != -ba {
			t.Fatalf("not antisymmetric: cmp(%q,%q)=%d cmp(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if ab < -1 || ab > 1 {
			t.Fatalf("cmp(%q,%q)=%d out of range", a, b, ab)
		}
		if CompareVersions(a, a) != 0 {
			t.Fatalf("cmp(%q,%q) != 0", a, a)
		}
		_ = KernelFlavor(a)
		if got := NewestKernel(a, []string{a, b}); got != a && got != b {
			t.Fatalf("NewestKernel invented %q", got)
		}
	})
}
