package main

// The nfnetlink_queue wire format, encoded and decoded by hand (no cgo, no
// libnetfilter_queue). Everything here is pure: it turns values into bytes
// and bytes into values and never touches a socket, so it is tested without
// root. Sources: linux/netlink.h, linux/netfilter/nfnetlink.h and
// linux/netfilter/nfnetlink_queue.h.
//
// A message is an nlmsghdr (host byte order), an nfgenmsg (family, version
// 0, res_id = queue number in network byte order) and netlink attributes
// {u16 len, u16 type} padded to 4 bytes. Attribute payloads of the queue
// subsystem are big endian.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

const (
	netlinkNetfilter = 12 // NETLINK_NETFILTER

	nlmsgHdrLen = 16 // struct nlmsghdr
	nfgenLen    = 4  // struct nfgenmsg
	nlaHdrLen   = 4  // struct nlattr
	nlaTypeMask = 0x3fff

	nlmFRequest = 0x1
	nlmFAck     = 0x4

	nlmsgNoop    = 0x1
	nlmsgError   = 0x2
	nlmsgDone    = 0x3
	nlmsgOverrun = 0x4

	nfnlSubsysQueue = 3

	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr  = 1 // struct nfqnl_msg_packet_hdr
	nfqaVerdictHdr = 2 // struct nfqnl_msg_verdict_hdr

	nfqaCfgCmd         = 1 // struct nfqnl_msg_config_cmd
	nfqaCfgParams      = 2 // struct nfqnl_msg_config_params
	nfqaCfgQueueMaxlen = 3 // __be32
	nfqaCfgMask        = 4 // __be32
	nfqaCfgFlags       = 5 // __be32

	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdUnbind = 2

	nfqnlCopyMeta = 1

	nfqaCfgFFailOpen = 1 << 0 // a full queue accepts instead of dropping
	nfqaCfgFGSO      = 1 << 2 // queue GSO packets whole, do not segment them

	nfAccept = 1 // NF_ACCEPT
)

// Errors of the decoder.
var (
	errShort     = errors.New("nfdelay: short netlink message")
	errBadLength = errors.New("nfdelay: netlink length field out of range")
	errNoPktHdr  = errors.New("nfdelay: packet without NFQA_PACKET_HDR")
)

// nlMsg is one netlink message: its header fields and the bytes after the
// header (nlmsg_len - 16 of them).
type nlMsg struct {
	Type    uint16
	Flags   uint16
	Seq     uint32
	PortID  uint32
	Payload []byte
}

// packet is what the kernel tells about a queued packet (metadata only).
type packet struct {
	Queue   uint16 // res_id of the nfgenmsg
	ID      uint32
	HWProto uint16
	Hook    uint8
}

// attr is one netlink attribute to encode.
type attr struct {
	Type uint16
	Data []byte
}

func align4(n int) int { return (n + 3) &^ 3 }

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// encodeQueueMsg builds one message of the queue subsystem: nlmsghdr,
// nfgenmsg (AF_UNSPEC, version 0, res_id = queue) and the attributes.
func encodeQueueMsg(msg uint8, flags uint16, seq uint32, queue uint16, attrs ...attr) []byte {
	n := nlmsgHdrLen + nfgenLen
	for _, a := range attrs {
		n += align4(nlaHdrLen + len(a.Data))
	}
	b := make([]byte, 0, n)
	b = binary.NativeEndian.AppendUint32(b, uint32(n))
	b = binary.NativeEndian.AppendUint16(b, nfnlSubsysQueue<<8|uint16(msg))
	b = binary.NativeEndian.AppendUint16(b, flags|nlmFRequest)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // port id: the kernel fills it in
	b = append(b, syscall.AF_UNSPEC, 0)        // family, NFNETLINK_V0
	b = binary.BigEndian.AppendUint16(b, queue)
	for _, a := range attrs {
		l := nlaHdrLen + len(a.Data)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, a.Type)
		b = append(b, a.Data...)
		for range align4(l) - l {
			b = append(b, 0)
		}
	}
	return b
}

// bindMsg binds queue to this socket (acknowledged).
func bindMsg(seq uint32, queue uint16) []byte {
	return encodeQueueMsg(nfqnlMsgConfig, nlmFAck, seq, queue,
		attr{nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0}})
}

// unbindMsg gives the queue back (acknowledged). The kernel drops what is
// still queued: accept everything first.
func unbindMsg(seq uint32, queue uint16) []byte {
	return encodeQueueMsg(nfqnlMsgConfig, nlmFAck, seq, queue,
		attr{nfqaCfgCmd, []byte{nfqnlCfgCmdUnbind, 0, 0, 0}})
}

// paramsMsg asks for metadata only, sets the queue length and the flags
// (fail open, whole GSO packets); acknowledged.
func paramsMsg(seq uint32, queue uint16, maxlen uint32) []byte {
	params := append(be32(0), nfqnlCopyMeta) // copy_range 0, copy_mode META (packed: 5 bytes)
	const flags = nfqaCfgFFailOpen | nfqaCfgFGSO
	return encodeQueueMsg(nfqnlMsgConfig, nlmFAck, seq, queue,
		attr{nfqaCfgParams, params},
		attr{nfqaCfgQueueMaxlen, be32(maxlen)},
		attr{nfqaCfgMask, be32(flags)},
		attr{nfqaCfgFlags, be32(flags)})
}

// verdictMsg gives the verdict for one packet (not acknowledged: the kernel
// answers only with an error).
func verdictMsg(seq uint32, queue uint16, id, verdict uint32) []byte {
	return encodeQueueMsg(nfqnlMsgVerdict, 0, seq, queue,
		attr{nfqaVerdictHdr, append(be32(verdict), be32(id)...)})
}

// parseMsgs splits a datagram read from the socket into its messages.
func parseMsgs(b []byte) ([]nlMsg, error) {
	var msgs []nlMsg
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return msgs, fmt.Errorf("%w: %d bytes left, a header needs %d", errShort, len(b), nlmsgHdrLen)
		}
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < nlmsgHdrLen || l > len(b) {
			return msgs, fmt.Errorf("%w: nlmsg_len %d with %d bytes left", errBadLength, l, len(b))
		}
		msgs = append(msgs, nlMsg{
			Type:    binary.NativeEndian.Uint16(b[4:6]),
			Flags:   binary.NativeEndian.Uint16(b[6:8]),
			Seq:     binary.NativeEndian.Uint32(b[8:12]),
			PortID:  binary.NativeEndian.Uint32(b[12:16]),
			Payload: b[nlmsgHdrLen:l],
		})
		if next := align4(l); next < len(b) {
			b = b[next:]
		} else {
			b = nil
		}
	}
	return msgs, nil
}

// parseAttrs decodes a run of attributes; a later attribute of the same
// type wins.
func parseAttrs(b []byte) (map[uint16][]byte, error) {
	m := map[uint16][]byte{}
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return m, fmt.Errorf("%w: %d bytes left, an attribute needs %d", errShort, len(b), nlaHdrLen)
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < nlaHdrLen || l > len(b) {
			return m, fmt.Errorf("%w: nla_len %d with %d bytes left", errBadLength, l, len(b))
		}
		m[binary.NativeEndian.Uint16(b[2:4])&nlaTypeMask] = b[nlaHdrLen:l]
		if next := align4(l); next < len(b) {
			b = b[next:]
		} else {
			b = nil
		}
	}
	return m, nil
}

// isQueueMsg reports whether m is the queue subsystem's message msg.
func isQueueMsg(m nlMsg, msg uint8) bool {
	return m.Type == nfnlSubsysQueue<<8|uint16(msg)
}

// decodePacket decodes the payload of an NFQNL_MSG_PACKET message.
func decodePacket(payload []byte) (packet, error) {
	if len(payload) < nfgenLen {
		return packet{}, fmt.Errorf("%w: %d bytes, nfgenmsg needs %d", errShort, len(payload), nfgenLen)
	}
	p := packet{Queue: binary.BigEndian.Uint16(payload[2:4])}
	attrs, err := parseAttrs(payload[nfgenLen:])
	if err != nil {
		return p, err
	}
	h, ok := attrs[nfqaPacketHdr]
	if !ok {
		return p, errNoPktHdr
	}
	if len(h) < 7 {
		return p, fmt.Errorf("%w: NFQA_PACKET_HDR of %d bytes, want 7", errShort, len(h))
	}
	p.ID = binary.BigEndian.Uint32(h[0:4])
	p.HWProto = binary.BigEndian.Uint16(h[4:6])
	p.Hook = h[6]
	return p, nil
}

// decodeError decodes the payload of an NLMSG_ERROR message: the error
// (0 for an acknowledgement, else a negative errno) and the sequence
// number of the request it answers.
func decodeError(payload []byte) (errno syscall.Errno, seq uint32, err error) {
	if len(payload) < 4+nlmsgHdrLen {
		return 0, 0, fmt.Errorf("%w: NLMSG_ERROR of %d bytes, want %d", errShort, len(payload), 4+nlmsgHdrLen)
	}
	code := int32(binary.NativeEndian.Uint32(payload[0:4]))
	seq = binary.NativeEndian.Uint32(payload[4+8 : 4+12])
	if code > 0 {
		return 0, seq, fmt.Errorf("%w: NLMSG_ERROR with positive code %d", errBadLength, code)
	}
	return syscall.Errno(-code), seq, nil
}
