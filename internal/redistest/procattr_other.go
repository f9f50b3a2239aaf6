//go:build !linux

package redistest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
