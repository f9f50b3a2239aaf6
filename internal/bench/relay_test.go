package bench

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

func TestRelayTCPCarriesAStream(t *testing.T) {
	up := httptest.NewServer(Upstreams())
	defer up.Close()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RelayTCP(ctx, addr, up.Listener.Addr().String()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RelayTCP: %v", err)
		}
	}()
	c := NewClient(1)
	defer c.CloseIdleConnections()
	var s Sample
	for deadline := time.Now().Add(5 * time.Second); ; {
		if s, err = Stream(ctx, c, "http://"+addr+"/zero", "zero", true); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the listener may not be up yet
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Gaps) != 19 {
		t.Errorf("relayed stream had %d gaps between chunks, want 19 (20 chunks)", len(s.Gaps))
	}
}
