package main

import (
	"github.com/alecthomas/kong"
)

// Globals are the flags every command takes (DESIGN §6).
type Globals struct {
	Config    string           `help:"Configuration file; its folder's config.d/ is the only drop-in directory. Default: /etc/clusterrebootd/config.toml plus the /usr/lib, /etc and /run drop-in directories." type:"path" placeholder:"FILE"`
	DryRun    bool             `help:"Do everything but the reboot itself (the slot is released at once); operator commands only print what they would change." name:"dry-run"`
	LogFormat string           `help:"Log format: journal, json or text (default: journal when JOURNAL_STREAM is set, else text)." enum:"journal,json,text," default:"" name:"log-format"`
	LogLevel  string           `help:"Log level: debug, info, warn, error." enum:"debug,info,warn,error" default:"info" name:"log-level"`
	Version   kong.VersionFlag `help:"Print the version and exit."`
}

// CLI is the command tree; each command has a Run(*Env) error.
type CLI struct {
	Globals

	Check          CheckCmd          `cmd:"" help:"Detect, release this node's slot after a reboot, run the pre-lock gates and start the lock holder when a reboot is due (what the timer runs)."`
	Hold           HoldCmd           `cmd:"" help:"Run the lock holder: queue on the cluster mutex, re-check every gate under the lock, take a fenced slot and reboot."`
	Status         StatusCmd         `cmd:"" help:"Show the cluster: every node, its state, slot, queue position and why it is not rebooting."`
	History        HistoryCmd        `cmd:"" help:"List the coordinated reboots recorded in etcd: when requested, node, time down and result."`
	Simulate       SimulateCmd       `cmd:"" help:"Evaluate every gate of a real run read-only and print the exit code a real run would give."`
	ValidateConfig ValidateConfigCmd `cmd:"" name:"validate-config" help:"Check the configuration (and drop-ins) without side effects."`
	Pause          PauseCmd          `cmd:"" help:"Pause all reboots in the cluster (kill switch in etcd)."`
	Resume         ResumeCmd         `cmd:"" help:"Clear the cluster-wide pause."`
	SetMax         SetMaxCmd         `cmd:"" name:"set-max" help:"Set the cluster-wide max_concurrent (the effective limit is the smaller of it and each node's config)."`
	Release        ReleaseCmd        `cmd:"" help:"Operator: free a stuck or overdue reboot slot (recorded in the history)."`
	Ack            AckCmd            `cmd:"" help:"Clear this node's reboot-loop guard after checking it."`
	Forget         ForgetCmd         `cmd:"" help:"Remove a decommissioned node's registration."`
	VersionCmd     VersionCmd        `cmd:"" name:"version" help:"Print version information."`
	GenDocs        GenDocsCmd        `cmd:"" name:"gen-docs" hidden:"" help:"Write the man page or a shell completion script (build step)."`
}
