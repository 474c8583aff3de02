package redissonstandin

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
)

// The script constants hash to the SHA1s taken from Redisson's Java string
// literals at the tags (layout.go), so no character was lost in
// transcription and Redisson's EVALSHA would find them in the script cache.
func TestScriptsAreRedissonsText(t *testing.T) {
	scripts := map[string]string{
		"RedissonLock.tryLockInnerAsync":             lockAcquire,
		"RedissonLock.unlockInnerAsync":              lockRelease,
		"RedissonLock.forceUnlockAsync":              lockForceUnlock,
		"LockTask.renew":                             lockRenew,
		"RedissonFairLock.tryLockInnerAsync/bool":    fairAcquireOnce,
		"RedissonFairLock.tryLockInnerAsync/long":    fairAcquire,
		"RedissonFairLock.acquireFailedAsync":        fairCancelWait,
		"RedissonFairLock.unlockInnerAsync":          fairRelease,
		"RedissonFairLock.forceUnlockAsync":          fairForceUnlock,
		"RedissonReadLock.tryLockInnerAsync":         readAcquire,
		"RedissonReadLock.unlockInnerAsync":          readRelease,
		"RedissonReadLock.forceUnlockAsync":          readForceUnlock,
		"RedissonReadLock.isLocked":                  readIsLocked,
		"ReadLockTask.renew@3.52.0":                  readRenew3,
		"ReadLockTask.renew@4.7.0":                   readRenew4,
		"RedissonWriteLock.tryLockInnerAsync":        writeAcquire,
		"RedissonWriteLock.unlockInnerAsync":         writeRelease,
		"RedissonWriteLock.forceUnlockAsync":         writeForceUnlock,
		"RedissonSpinLock.tryLockInnerAsync":         spinAcquire,
		"RedissonSpinLock.unlockInnerAsync":          spinRelease,
		"RedissonSpinLock.forceUnlockAsync":          spinForceUnlock,
		"RedissonNonReentrantLock.tryLockInnerAsync": nonReentrantAcquire,
	}
	if len(scripts) != len(ScriptSHA1) {
		t.Fatalf("%d scripts, %d SHA1s", len(scripts), len(ScriptSHA1))
	}
	for name, s := range scripts {
		sum := sha1.Sum([]byte(s))
		if got, want := hex.EncodeToString(sum[:]), ScriptSHA1[name]; got != want {
			t.Errorf("%s: sha1 %s, want %s (Redisson's text)", name, got, want)
		}
	}
}

// The spin lock's default back-off, with ThreadLocalRandom.nextInt(n)
// answering 0 and n-1.
func TestBackoffSequence(t *testing.T) {
	for _, tc := range []struct {
		rnd  func(int) int
		want []int64
	}{
		{func(int) int { return 0 }, []int64{1, 2, 4, 8, 16, 32, 64, 128, 128, 128}},
		{func(n int) int { return n - 1 }, []int64{1, 2, 5, 12, 27, 58, 121, 128, 128}},
	} {
		p := ExponentialBackoff{}.Policy(tc.rnd)
		for i, w := range tc.want {
			if got := p.Next().Milliseconds(); got != w {
				t.Fatalf("period %d = %d ms, want %d", i, got, w)
			}
		}
	}
}
