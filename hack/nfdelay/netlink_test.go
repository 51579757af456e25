package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"syscall"
	"testing"
)

// hdr builds an nlmsghdr the way the kernel does (host byte order).
func hdr(length uint32, typ, flags uint16, seq, port uint32) []byte {
	b := binary.NativeEndian.AppendUint32(nil, length)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	return binary.NativeEndian.AppendUint32(b, port)
}

func nla(typ uint16, data ...byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// packetMsg is an NFQNL_MSG_PACKET as the kernel sends it for queue q.
func packetMsg(q uint16, id uint32, extra ...[]byte) []byte {
	body := cat([]byte{syscall.AF_INET, 0}, be16(q),
		nla(nfqaPacketHdr, cat(be32(id), be16(0x0800), []byte{3})...), cat(extra...))
	return cat(hdr(uint32(16+len(body)), nfnlSubsysQueue<<8|nfqnlMsgPacket, 0, 0, 0), body)
}

func TestEncode(t *testing.T) {
	le := binary.NativeEndian
	fixed := func(length uint32, msg uint16, flags uint16, seq uint32, queue uint16) []byte {
		return cat(hdr(length, nfnlSubsysQueue<<8|msg, flags, seq, 0), []byte{0, 0}, be16(queue))
	}
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"bind", bindMsg(7, 3), cat(fixed(28, 2, nlmFRequest|nlmFAck, 7, 3), nla(1, 1, 0, 0, 0))},
		{"unbind", unbindMsg(8, 0xabcd), cat(fixed(28, 2, nlmFRequest|nlmFAck, 8, 0xabcd), nla(1, 2, 0, 0, 0))},
		{"params", paramsMsg(9, 1, 4096), cat(fixed(20+12+8+8+8, 2, nlmFRequest|nlmFAck, 9, 1),
			nla(2, 0, 0, 0, 0, 1), // copy_range 0, copy_mode META, padded to 12
			nla(3, 0, 0, 0x10, 0), // maxlen 4096 big endian
			nla(4, 0, 0, 0, 5),    // mask FAIL_OPEN|GSO
			nla(5, 0, 0, 0, 5))},  // flags FAIL_OPEN|GSO
		{"verdict", verdictMsg(10, 2, 0x01020304, nfAccept), cat(fixed(32, 1, nlmFRequest, 10, 2),
			nla(2, 0, 0, 0, 1, 1, 2, 3, 4))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Fatalf("encoded\n got %x\nwant %x", tt.got, tt.want)
			}
			if int(le.Uint32(tt.got)) != len(tt.got) || len(tt.got)%4 != 0 {
				t.Fatalf("nlmsg_len %d, message %d bytes", le.Uint32(tt.got), len(tt.got))
			}
			// What we encode decodes again.
			ms, err := parseMsgs(tt.got)
			if err != nil || len(ms) != 1 {
				t.Fatalf("parseMsgs: %v, %d messages", err, len(ms))
			}
			if _, err := parseAttrs(ms[0].Payload[nfgenLen:]); err != nil {
				t.Fatalf("parseAttrs: %v", err)
			}
		})
	}
}

func TestDecodePacket(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    packet
		err     error
	}{
		{"plain", packetMsg(5, 0xdeadbeef)[16:], packet{Queue: 5, ID: 0xdeadbeef, HWProto: 0x0800, Hook: 3}, nil},
		{"with other attributes", packetMsg(0, 42, nla(6, 0, 0, 0, 2), nla(3|0x8000, 1, 2, 3, 4))[16:],
			packet{ID: 42, HWProto: 0x0800, Hook: 3}, nil},
		{"no nfgenmsg", []byte{2, 0}, packet{}, errShort},
		{"no packet header", cat([]byte{2, 0, 0, 1}, nla(6, 0, 0, 0, 2)), packet{Queue: 1}, errNoPktHdr},
		{"short packet header", cat([]byte{2, 0, 0, 1}, nla(1, 0, 0, 0, 9)), packet{Queue: 1}, errShort},
		{"attribute runs past the end", cat([]byte{2, 0, 0, 0}, []byte{40, 0, 1, 0}, make([]byte, 8)), packet{}, errBadLength},
		{"attribute length below its header", cat([]byte{2, 0, 0, 0}, []byte{2, 0, 1, 0}), packet{}, errBadLength},
		{"truncated attribute header", cat([]byte{2, 0, 0, 0}, []byte{8, 0}), packet{}, errShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePacket(tt.payload)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMsgs(t *testing.T) {
	p1, p2 := packetMsg(0, 1), packetMsg(0, 2)
	odd := cat(hdr(17, nlmsgNoop, 0, 0, 0), []byte{9, 0, 0, 0}) // 17 bytes, padded to 20
	tests := []struct {
		name  string
		in    []byte
		types []uint16
		err   error
	}{
		{"empty", nil, nil, nil},
		{"one", p1, []uint16{0x300}, nil},
		{"two", cat(p1, p2), []uint16{0x300, 0x300}, nil},
		{"padding between messages", cat(odd, p1), []uint16{nlmsgNoop, 0x300}, nil},
		{"last message unpadded", odd[:17], []uint16{nlmsgNoop}, nil},
		{"short header", p1[:10], nil, errShort},
		{"length below header", hdr(8, 0, 0, 0, 0), nil, errBadLength},
		{"length past the end", cat(p1, hdr(64, 0, 0, 0, 0)), []uint16{0x300}, errBadLength},
		{"trailing garbage", cat(p1, []byte{1, 2, 3}), []uint16{0x300}, errShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := parseMsgs(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			var types []uint16
			for _, m := range ms {
				types = append(types, m.Type)
			}
			if !slices.Equal(types, tt.types) {
				t.Fatalf("types %x, want %x", types, tt.types)
			}
		})
	}
}

func TestDecodeError(t *testing.T) {
	errPayload := func(code int32, seq uint32) []byte {
		return cat(binary.NativeEndian.AppendUint32(nil, uint32(code)), hdr(28, 0x302, 5, seq, 99))
	}
	tests := []struct {
		name    string
		payload []byte
		errno   syscall.Errno
		seq     uint32
		err     error
	}{
		{"ack", errPayload(0, 11), 0, 11, nil},
		{"EBUSY", errPayload(-int32(syscall.EBUSY), 12), syscall.EBUSY, 12, nil},
		{"EPERM", errPayload(-int32(syscall.EPERM), 13), syscall.EPERM, 13, nil},
		{"positive code", errPayload(5, 14), 0, 14, errBadLength},
		{"short", errPayload(0, 1)[:12], 0, 0, errShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errno, seq, err := decodeError(tt.payload)
			if !errors.Is(err, tt.err) || errno != tt.errno || seq != tt.seq {
				t.Fatalf("got (%v, %d, %v), want (%v, %d, %v)", errno, seq, err, tt.errno, tt.seq, tt.err)
			}
		})
	}
}

func TestIsQueueMsg(t *testing.T) {
	ms, err := parseMsgs(cat(packetMsg(0, 1), verdictMsg(1, 0, 1, nfAccept)))
	if err != nil {
		t.Fatal(err)
	}
	if !isQueueMsg(ms[0], nfqnlMsgPacket) || isQueueMsg(ms[0], nfqnlMsgVerdict) {
		t.Fatalf("packet message %#x misclassified", ms[0].Type)
	}
	if !isQueueMsg(ms[1], nfqnlMsgVerdict) || isQueueMsg(ms[1], nfqnlMsgPacket) {
		t.Fatalf("verdict message %#x misclassified", ms[1].Type)
	}
}
