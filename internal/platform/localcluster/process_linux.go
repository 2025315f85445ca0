package localcluster

import "syscall"

// attachedAttr makes an attached process lead a process group of its own and makes the kernel
// send it SIGKILL when the test binary dies, SIGKILL and panics included.
func attachedAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
