//go:build !linux

package localcluster

import "syscall"

// reaperAttr puts the reaper in its own session so signals to the test's process group miss it.
func reaperAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
