package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves a line-echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestFreezeHoldsBytesAndThawDeliversThem(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "one", time.Second); err != nil || got != "one\n" {
		t.Fatalf("before the freeze: %q, %v", got, err)
	}
	p.Freeze()
	if got, err := roundTrip(c, r, "two", 100*time.Millisecond); err == nil {
		t.Fatalf("frozen: got %q, want a timeout", got)
	}
	// A new connection is accepted but hangs too.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if got, err := roundTrip(c2, r2, "x", 100*time.Millisecond); err == nil {
		t.Fatalf("frozen, new connection: got %q, want a timeout", got)
	}
	p.Thaw()
	c.SetDeadline(time.Now().Add(time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after the thaw, the held line: %q, %v", got, err)
	}
	c2.SetDeadline(time.Now().Add(time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "x\n" {
		t.Fatalf("after the thaw, the new connection: %q, %v", got, err)
	}
}

func TestCutResetsConnections(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, "one", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if got, err := roundTrip(c, r, "two", time.Second); err == nil {
		t.Fatalf("after a cut: got %q, want an error", got)
	}
}
