// Command nfdelay adds delay and jitter to the packets of one NFQUEUE
// queue, in userspace, for kernels without sch_netem. The e2e chaos matrix
// (hack/e2e/netem.sh) runs it inside a network namespace:
//
//	ip netns exec NS nfdelay --queue 0 --delay 120ms --jitter 30ms --pidfile F &
//	ip netns exec NS iptables -w -A INPUT -i eth0 -j NFQUEUE --queue-num 0 --queue-bypass
//
// Queue packets on their way in (INPUT, PREROUTING), not out: a locally
// sent packet held in the queue still counts against its socket, and TCP
// small queues then allow a flow about two packets per delay.
//
// It binds queue N of the current network namespace, asks for metadata
// only (NFQNL_COPY_META: no payload is copied), and gives every packet an
// NF_ACCEPT verdict after delay ± a uniform jitter. Packets leave in the
// order they came: a packet's release time is max(arrival + delay ±
// jitter, release time of the packet before it). The queue is fail-open (a
// full queue or a full socket buffer accepts instead of dropping) and
// holds --maxlen packets.
//
// SIGTERM or SIGINT: every pending packet is accepted at once, the queue is
// unbound, the pid file removed, exit 0. Delete the iptables rule first so
// that no new packet is queued. A SIGKILLed nfdelay loses what it held (the
// kernel drops the queue's packets when the socket closes); with
// --queue-bypass, later packets pass untouched.
//
// Exit status: 0 after a signal, 1 on a runtime error (no permission, queue
// bound by someone else), 2 on a usage error. Build: cd hack && go build
// ./nfdelay. Its protocol code is pure and tested without root
// (netlink_test.go); nfdelay_root_test.go measures it on a veth pair.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	queue         uint16
	delay, jitter time.Duration
	maxlen        uint32
	pidfile       string
}

const maxDelay = 30 * time.Second

// errUsage marks a command line error (exit 2).
var errUsage = errors.New("nfdelay: usage")

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("nfdelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.Uint("queue", 0, "NFQUEUE queue number to bind (0-65535)")
	fs.DurationVar(&o.delay, "delay", 0, "added delay per packet, e.g. 120ms (required, > 0, <= 30s)")
	fs.DurationVar(&o.jitter, "jitter", 0, "uniform jitter: each packet gets delay ± jitter (<= delay)")
	maxlen := fs.Uint("maxlen", 4096, "queue length in packets (1-1048576); beyond it the queue accepts at once (fail-open)")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the pid here once the queue is bound; removed on exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: nfdelay --delay D [--jitter J] [--queue N] [--maxlen N] [--pidfile F]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	bad := func(format string, a ...any) (options, error) {
		fs.Usage()
		return o, fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case *queue > 65535:
		return bad("--queue %d out of range 0-65535", *queue)
	case o.delay <= 0 || o.delay > maxDelay:
		return bad("--delay %v out of range (0, %v]", o.delay, maxDelay)
	case o.jitter < 0 || o.jitter > o.delay:
		return bad("--jitter %v out of range [0, --delay]", o.jitter)
	case *maxlen < 1 || *maxlen > 1<<20:
		return bad("--maxlen %d out of range 1-1048576", *maxlen)
	}
	o.queue, o.maxlen = uint16(*queue), uint32(*maxlen)
	return o, nil
}

func main() {
	logger := log.New(os.Stderr, "nfdelay: ", log.LstdFlags|log.Lmicroseconds)
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := run(o, sigs, logger); err != nil {
		logger.Print(err)
		os.Exit(1)
	}
}

// writePidFile writes the pid atomically (temporary file, rename): a
// reader never sees a partial file, and the file's presence means "bound".
func writePidFile(path string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// run binds the queue, delays its packets until a signal arrives, then
// accepts what is pending and unbinds.
func run(o options, sigs <-chan os.Signal, logger *log.Logger) error {
	c, err := openConn(logger)
	if err != nil {
		return err
	}
	defer c.close()
	sched := newSchedule(o.delay, o.jitter, uint64(time.Now().UnixNano()))
	rel := newReleaser(int(o.maxlen)+1024, func(id uint32) error { return c.verdict(o.queue, id) }, logger)
	relDone := make(chan struct{})
	go func() { rel.run(); close(relDone) }()
	var total uint64
	enqueue := func(p packet) {
		total++
		rel.in <- queued{id: p.ID, due: sched.release(time.Now())}
	}
	stopRel := func() { rel.stop(); close(rel.in); <-relDone }

	if err := c.request(bindMsg(c.nextSeq(), o.queue), enqueue); err != nil {
		stopRel()
		return fmt.Errorf("bind queue %d: %w", o.queue, err)
	}
	if err := c.request(paramsMsg(c.nextSeq(), o.queue, o.maxlen), enqueue); err != nil {
		stopRel()
		_ = c.request(unbindMsg(c.nextSeq(), o.queue), c.acceptNow(o.queue, logger))
		return fmt.Errorf("configure queue %d: %w", o.queue, err)
	}
	if o.pidfile != "" {
		if err := writePidFile(o.pidfile); err != nil {
			stopRel()
			_ = c.request(unbindMsg(c.nextSeq(), o.queue), c.acceptNow(o.queue, logger))
			return fmt.Errorf("pid file: %w", err)
		}
		defer os.Remove(o.pidfile)
	}
	logger.Printf("queue %d bound: delay %v ± %v, maxlen %d, fail-open", o.queue, o.delay, o.jitter, o.maxlen)

	// Until a signal: read, schedule. From the signal on (the releaser
	// hears it at once): accept everything that is pending or still
	// arrives, until the socket stays quiet for one read timeout
	// (bounded), then unbind.
	stopped := make(chan struct{})
	go func() {
		sig := <-sigs
		rel.stop()
		logger.Printf("%v: accepting what is pending", sig)
		close(stopped)
	}()
	var quietBy time.Time
	for {
		if quietBy.IsZero() {
			select {
			case <-stopped:
				quietBy = time.Now().Add(flushLimit)
			default:
			}
		}
		n, err := c.readOnce(enqueue)
		if err != nil {
			rel.stop()
			close(rel.in)
			<-relDone
			return err
		}
		if !quietBy.IsZero() && (n == 0 || time.Now().After(quietBy)) {
			break
		}
	}
	close(rel.in)
	<-relDone
	if err := c.request(unbindMsg(c.nextSeq(), o.queue), c.acceptNow(o.queue, logger)); err != nil {
		logger.Printf("unbind queue %d: %v", o.queue, err)
	}
	logger.Printf("queue %d unbound: %d packets queued, %d accepted (%d of them early at shutdown), %d verdicts failed, %d socket overruns (ENOBUFS)",
		o.queue, total, rel.accepted.Load(), rel.flushed.Load(), rel.failed.Load(), c.overruns)
	return nil
}
