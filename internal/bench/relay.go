package bench

import (
	"context"
	"io"
	"net"
)

// RelayTCP accepts connections on addr and copies bytes both ways between
// each and a new connection to upstream: an extra hop that parses nothing
// and adds no HTTP, the least any gateway in the path can cost.
func RelayTCP(ctx context.Context, addr, upstream string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go relay(c, upstream)
	}
}

func relay(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(u, c)
		u.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, u)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
