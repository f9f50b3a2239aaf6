package redistest

import "syscall"

// procAttr has the kernel kill a server if the test binary dies before
// its cleanups run (a test's timeout).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
