//go:build !linux

package gateway

import "net"

// refuseNewConnections cannot make the listener stop completing new
// connections here: the ones completed in the instant before it closes
// are reset, as without quiesce.
func refuseNewConnections(net.Listener) bool { return false }

// acceptQueue cannot tell the accept queue's length here.
func acceptQueue(net.Listener) int { return 0 }
