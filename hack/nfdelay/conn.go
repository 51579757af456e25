package main

import (
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	readTimeout = 100 * time.Millisecond // SO_RCVTIMEO: how often the read loop looks at signals
	flushLimit  = 2 * time.Second        // longest wait for a quiet socket after a signal
	ackTimeout  = 5 * time.Second        // longest wait for the kernel's answer to a config request
	rcvBuf      = 8 << 20                // socket receive buffer
)

var errNoAck = errors.New("nfdelay: no acknowledgement from the kernel")

// conn is a NETLINK_NETFILTER socket of this network namespace. Verdicts
// may be sent from another goroutine while one goroutine reads.
type conn struct {
	fd       int
	seq      atomic.Uint32
	buf      []byte
	overruns uint64        // ENOBUFS seen by the reader
	req      atomic.Uint32 // sequence number of the config request in flight (0: none)
	log      *log.Logger
}

func openConn(logger *log.Logger) (*conn, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkNetfilter)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	// A large receive buffer keeps bursts from overrunning the socket
	// (SO_RCVBUFFORCE needs CAP_NET_ADMIN, which binding a queue needs too).
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, rcvBuf); err != nil {
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvBuf)
	}
	tv := syscall.NsecToTimeval(int64(readTimeout))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	return &conn{fd: fd, buf: make([]byte, 1<<16), log: logger}, nil
}

func (c *conn) close() { syscall.Close(c.fd) }

func (c *conn) nextSeq() uint32 { return c.seq.Add(1) }

func (c *conn) send(b []byte) error {
	for {
		err := syscall.Sendto(c.fd, b, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
		if err != syscall.EINTR {
			return err
		}
	}
}

// verdict accepts packet id of queue.
func (c *conn) verdict(queue uint16, id uint32) error {
	return c.send(verdictMsg(c.nextSeq(), queue, id, nfAccept))
}

// acceptNow is a packet handler that accepts at once (setup and teardown).
func (c *conn) acceptNow(queue uint16, logger *log.Logger) func(packet) {
	return func(p packet) {
		if err := c.verdict(queue, p.ID); err != nil {
			logger.Printf("verdict for packet %d: %v", p.ID, err)
		}
	}
}

// answer is the kernel's NLMSG_ERROR for one request.
type answer struct {
	seq   uint32
	errno syscall.Errno
}

// read reads one datagram (or times out: 0 messages) and hands packets to
// onPacket. It returns the number of messages and the kernel's answers.
// ENOBUFS (the socket overran: with fail-open the kernel accepted those
// packets undelayed) is counted and is no error.
func (c *conn) read(onPacket func(packet)) (int, []answer, error) {
	n, from, err := syscall.Recvfrom(c.fd, c.buf, 0)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, nil, nil
	case err == syscall.ENOBUFS:
		c.overruns++
		if c.overruns == 1 || c.overruns%100 == 0 {
			c.log.Printf("socket receive buffer overrun (%d so far): packets passed undelayed", c.overruns)
		}
		return 1, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("netlink read: %w", err)
	}
	if sa, ok := from.(*syscall.SockaddrNetlink); !ok || sa.Pid != 0 {
		return 1, nil, nil // not from the kernel
	}
	msgs, perr := parseMsgs(c.buf[:n])
	if perr != nil {
		c.log.Printf("malformed netlink datagram (%d bytes): %v", n, perr)
	}
	var answers []answer
	for _, m := range msgs {
		switch {
		case isQueueMsg(m, nfqnlMsgPacket):
			p, err := decodePacket(m.Payload)
			if err != nil {
				c.log.Printf("malformed packet message: %v", err)
				continue
			}
			onPacket(p)
		case m.Type == nlmsgError:
			errno, seq, err := decodeError(m.Payload)
			if err != nil {
				c.log.Printf("malformed error message: %v", err)
				continue
			}
			answers = append(answers, answer{seq, errno})
			if errno != 0 && !c.isRequest(seq) {
				c.log.Printf("kernel refused message %d: %v", seq, errno)
			}
		case m.Type == nlmsgOverrun:
			c.log.Printf("netlink overrun message")
		case m.Type == nlmsgNoop, m.Type == nlmsgDone:
		default:
			c.log.Printf("unexpected netlink message type %#x", m.Type)
		}
	}
	return max(len(msgs), 1), answers, nil
}

// isRequest: the answer to the config request in flight is reported by
// request, not logged by read.
func (c *conn) isRequest(seq uint32) bool { return seq != 0 && c.req.Load() == seq }

// readOnce is read without the answers (they were logged).
func (c *conn) readOnce(onPacket func(packet)) (int, error) {
	n, _, err := c.read(onPacket)
	return n, err
}

// request sends an acknowledged config message and waits for the kernel's
// answer, handing packets that arrive meanwhile to onPacket.
func (c *conn) request(msg []byte, onPacket func(packet)) error {
	ms, err := parseMsgs(msg)
	if err != nil || len(ms) != 1 {
		return fmt.Errorf("nfdelay: bad request: %v", err)
	}
	seq := ms[0].Seq
	c.req.Store(seq)
	defer c.req.Store(0)
	if err := c.send(msg); err != nil {
		return err
	}
	deadline := time.Now().Add(ackTimeout)
	for time.Now().Before(deadline) {
		_, answers, err := c.read(onPacket)
		if err != nil {
			return err
		}
		for _, a := range answers {
			if a.seq == seq {
				if a.errno != 0 {
					return a.errno
				}
				return nil
			}
		}
	}
	return errNoAck
}
