package main

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckNodeArg: a node name from the command line must be a valid node
// name (it becomes an etcd key segment); anything else is bad input (exit
// 2), and the message does not echo a huge argument.
func TestCheckNodeArg(t *testing.T) {
	for _, tc := range []struct {
		node string
		ok   bool
	}{
		{"node-1", true},
		{"web01.example_x", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"..", false},
		{".", false},
		{"../x", false},
		{"a/b", false},
		{"/abs", false},
		{"a\nb", false},
		{"a\x00b", false},
		{"a b", false},
		{"-a", false},
		{"ä", false},
		{strings.Repeat("x", 1<<20), false},
	} {
		err := checkNodeArg("forget", tc.node)
		if (err == nil) != tc.ok {
			t.Errorf("checkNodeArg(%.40q) = %v, want ok %v", tc.node, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		var ec interface{ ExitCode() int }
		if !errors.As(err, &ec) || ec.ExitCode() != 2 {
			t.Errorf("checkNodeArg(%.40q): %v does not exit 2", tc.node, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "forget: ") || !strings.Contains(msg, "is not a valid node name") {
			t.Errorf("message %q", msg)
		}
		if len(msg) > 200 || strings.ContainsAny(msg, "\n\x00") {
			t.Errorf("message of %d bytes echoes the argument: %.200q", len(msg), msg)
		}
	}
}
