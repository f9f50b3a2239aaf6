package gateway

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropSYNs is a classic BPF socket filter for a TCP listener: it drops a
// segment with SYN set and ACK clear (a new connection) and keeps every
// other (the handshakes under way complete). The kernel runs it on what
// reaches the listener with the TCP header at offset 0.
var dropSYNs = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 13},            // the flags byte
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: 0x10, Jt: 1}, // ACK: keep
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: 0x02, Jt: 1}, // SYN: drop
	{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// refuseNewConnections makes the TCP listener ln stop completing new
// connections; the ones it completed stay queued for Accept. It reports
// whether it could.
func refuseNewConnections(ln net.Listener) bool {
	ok := false
	control(ln, func(fd int) {
		prog := unix.SockFprog{Len: uint16(len(dropSYNs)), Filter: unsafe.SliceData(dropSYNs)}
		ok = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog) == nil
	})
	return ok
}

// tcpListen is TCP_LISTEN, a listening socket's tcpi_state.
const tcpListen = 10

// acceptQueue is how many connections the kernel completed on ln that
// were not accepted yet (0 when it cannot tell).
func acceptQueue(ln net.Listener) int {
	n := 0
	control(ln, func(fd int) {
		// On a listening socket, tcpi_unacked is the accept queue's length.
		if info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && info.State == tcpListen {
			n = int(info.Unacked)
		}
	})
	return n
}

// control runs f on the socket of ln, if ln is a TCP listener.
func control(ln net.Listener, f func(fd int)) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { f(int(fd)) })
}
