package security

import (
	"strings"
	"testing"
)

// TestSecretFileModes: a TLS key or password file that group or others can
// read is refused before anything is contacted: exit 2 naming the key, the
// file and its mode, for every command that reads the configuration.
func TestSecretFileModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := newCA(t, dir, "modes")
	for _, tc := range []struct {
		name string
		mode uint32
		pw   bool // the password file has the mode, else the TLS key
		ok   bool
	}{
		{"key 0600", 0o600, false, true},
		{"key 0400", 0o400, false, true},
		{"key 0640", 0o640, false, false},
		{"key 0644", 0o644, false, false},
		{"key 0604", 0o604, false, false},
		{"password 0600", 0o600, true, true},
		{"password 0640", 0o640, true, false},
		{"password 0666", 0o666, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Nothing listens on port 1: a refused file must be refused
			// before etcd is dialled, an accepted one gets as far as etcd.
			n := newNode(t, "modes", "node-1", nodeConf{})
			p := c.client("node-1")
			n.write("pw", "pw\n", 0o600)
			conf := nodeConf{Endpoints: []string{"https://127.0.0.1:1"}, CAFile: c.file, Cert: p,
				Username: "u", PasswordFile: n.path("pw"), DialTimeout: "500ms"}
			file, key := p.key, "etcd.tls.key_file"
			if tc.pw {
				file, key = n.path("pw"), "etcd.password_file"
			}
			chmod(t, file, tc.mode)
			n.conf = conf
			n.writeConfig()
			for _, args := range [][]string{{"validate-config"}, {"check", "--once"}, {"hold"}, {"status"}, {"simulate"}} {
				r := n.run(args...)
				if tc.ok {
					if r.code == exitConfig {
						t.Fatalf("mode %04o refused: %s", tc.mode, r)
					}
					continue
				}
				if r.code != exitConfig {
					t.Fatalf("mode %04o: exit %d, want %d\n%s", tc.mode, r.code, exitConfig, r)
				}
				for _, want := range []string{key, file, "too open", "0600"} {
					if !strings.Contains(r.stderr, want) {
						t.Fatalf("stderr lacks %q\n%s", want, r)
					}
				}
			}
		})
	}
}
