// The script text below was produced mechanically from Redisson's Java
// source: each constant is the concatenation of the Java string literals of
// one script, fragment for fragment, with Redisson's own comments kept. It
// must stay byte-equal to the string Redisson sends (Redisson's script cache
// sends EVALSHA of the same text); layout.go records each SHA1 and
// TestScriptsAreRedissonsText checks them. Unless a comment says otherwise,
// the text is the same at redisson-3.52.0 and redisson-4.7.0.

package redissonstandin

const (
	// lockAcquire is RedissonLock.tryLockInnerAsync (also the non-fair base of the others).
	// Source: redisson/src/main/java/org/redisson/RedissonLock.java at tag redisson-4.7.0.
	lockAcquire = "" +
		"if ((redis.call('exists', KEYS[1]) == 0) " +
		"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);"

	// lockRelease is RedissonLock.unlockInnerAsync; RedissonNonReentrantLock inherits it.
	// Source: redisson/src/main/java/org/redisson/RedissonLock.java at tag redisson-4.7.0.
	lockRelease = "" +
		"local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; "

	// lockForceUnlock is RedissonLock.forceUnlockAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonLock.java at tag redisson-4.7.0.
	lockForceUnlock = "" +
		"if (redis.call('del', KEYS[1]) == 1) then " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"

	// lockRenew is LockTask's batched renewal (renewExpirationAsync of the plain, fair, spin, write and non-reentrant locks).
	// Source: redisson/src/main/java/org/redisson/renewal/LockTask.java at tag redisson-4.7.0.
	lockRenew = "" +
		"local result = {} " +
		"for i = 1, #KEYS, 1 do " +
		"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;"

	// fairAcquireOnce is RedissonFairLock.tryLockInnerAsync for EVAL_NULL_BOOLEAN (tryLock() with no wait): nil acquired, 1 refused; it never queues.
	// Source: redisson/src/main/java/org/redisson/RedissonFairLock.java at tag redisson-4.7.0.
	fairAcquireOnce = "" +
		"while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end;" +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[3]) then " +
		// remove the item from the queue and timeout set
		// NOTE we do not alter any other timeout
		"redis.call('zrem', KEYS[3], firstThreadId2);" +
		"redis.call('lpop', KEYS[2]);" +
		"else " +
		"break;" +
		"end;" +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) " +
		"and ((redis.call('exists', KEYS[2]) == 0) " +
		"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
		"redis.call('lpop', KEYS[2]);" +
		"redis.call('zrem', KEYS[3], ARGV[2]);" +
		// decrease timeouts for all waiting in the queue
		"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
		"for i = 1, #keys, 1 do " +
		"redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), keys[i]);" +
		"end;" +
		"redis.call('hset', KEYS[1], ARGV[2], 1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"return 1;"

	// fairAcquire is RedissonFairLock.tryLockInnerAsync for EVAL_LONG (lock(), tryLock(wait, ...)): nil acquired, else a TTL; it queues the caller.
	// Source: redisson/src/main/java/org/redisson/RedissonFairLock.java at tag redisson-4.7.0.
	fairAcquire = "" +
		"while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end;" +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
		// remove the item from the queue and timeout set
		// NOTE we do not alter any other timeout
		"redis.call('zrem', KEYS[3], firstThreadId2);" +
		"redis.call('lpop', KEYS[2]);" +
		"else " +
		"break;" +
		"end;" +
		"end;" +
		// check if the lock can be acquired now
		"if (redis.call('exists', KEYS[1]) == 0) " +
		"and ((redis.call('exists', KEYS[2]) == 0) " +
		"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
		// remove this thread from the queue and timeout set
		"redis.call('lpop', KEYS[2]);" +
		"redis.call('zrem', KEYS[3], ARGV[2]);" +
		// decrease timeouts for all waiting in the queue
		"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
		"for i = 1, #keys, 1 do " +
		"redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);" +
		"end;" +
		// acquire the lock and set the TTL for the lease
		"redis.call('hset', KEYS[1], ARGV[2], 1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		// check if the lock is already held, and this is a re-entry
		"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " +
		"redis.call('hincrby', KEYS[1], ARGV[2],1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		// the lock cannot be acquired
		// check if the thread is already in the queue
		"local timeout = redis.call('zscore', KEYS[3], ARGV[2]);" +
		"if timeout ~= false then " +
		"local ttl = redis.call('pttl', KEYS[1]);" +
		"return math.max(0, ttl); " +
		// the real timeout is the timeout of the prior thread
		// in the queue, but this is approximately correct, and
		// avoids having to traverse the queue
		//                        "return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);" +
		"end;" +
		// add the thread to the queue at the end, and set its timeout in the timeout set to the timeout of
		// the prior thread in the queue (or the timeout of the lock if the queue is empty) plus the
		// threadWaitTime
		"local lastThreadId = redis.call('lindex', KEYS[2], -1);" +
		"local ttl;" +
		"if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then " +
		"ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);" +
		"else " +
		"ttl = redis.call('pttl', KEYS[1]);" +
		"end;" +
		"local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);" +
		"if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then " +
		"redis.call('rpush', KEYS[2], ARGV[2]);" +
		"end;" +
		"return ttl;"

	// fairCancelWait is RedissonFairLock.acquireFailedAsync: the waiter leaves the queue.
	// Source: redisson/src/main/java/org/redisson/RedissonFairLock.java at tag redisson-4.7.0.
	fairCancelWait = "" +
		"local queue = redis.call('lrange', KEYS[1], 0, -1);" +
		// find the location in the queue where the thread is
		"local i = 1;" +
		"while i <= #queue and queue[i] ~= ARGV[1] do " +
		"i = i + 1;" +
		"end;" +
		// go to the next index which will exist after the current thread is removed
		"i = i + 1;" +
		// decrement the timeout for the rest of the queue after the thread being removed
		"while i <= #queue do " +
		"redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);" +
		"i = i + 1;" +
		"end;" +
		// remove the thread from the queue and timeouts set
		"redis.call('zrem', KEYS[2], ARGV[1]);" +
		"redis.call('lrem', KEYS[1], 0, ARGV[1]);"

	// fairRelease is RedissonFairLock.unlockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonFairLock.java at tag redisson-4.7.0.
	fairRelease = "" +
		"local val = redis.call('get', KEYS[5]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		// remove stale threads
		"while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end; " +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2); " +
		"redis.call('lpop', KEYS[2]); " +
		"else " +
		"break;" +
		"end; " +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) then " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
		"return 1; " +
		"end;" +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[6]); " +
		"return 0; " +
		"end; " +
		"redis.call('del', KEYS[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"return 1; "

	// fairForceUnlock is RedissonFairLock.forceUnlockAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonFairLock.java at tag redisson-4.7.0.
	fairForceUnlock = "" +
		"while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end; " +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[2]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2); " +
		"redis.call('lpop', KEYS[2]); " +
		"else " +
		"break;" +
		"end; " +
		"end;" +
		"if (redis.call('del', KEYS[1]) == 1) then " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call(ARGV[3], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"return 1; " +
		"end; " +
		"return 0;"

	// readAcquire is RedissonReadLock.tryLockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonReadLock.java at tag redisson-4.7.0.
	readAcquire = "" +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('set', KEYS[2] .. ':1', 1); " +
		"redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then " +
		"local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local key = KEYS[2] .. ':' .. ind;" +
		"redis.call('set', key, 1); " +
		"redis.call('pexpire', key, ARGV[1]); " +
		"local remainTime = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); " +
		"return nil; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);"

	// readRelease is RedissonReadLock.unlockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonReadLock.java at tag redisson-4.7.0.
	readRelease = "" +
		"local val = redis.call('get', KEYS[5]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return nil; " +
		"end; " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
		"if (counter == 0) then " +
		"redis.call('hdel', KEYS[1], ARGV[2]); " +
		"end;" +
		"redis.call('del', KEYS[3] .. ':' .. (counter+1)); " +
		"if (redis.call('hlen', KEYS[1]) > 1) then " +
		"local maxRemainTime = -3; " +
		"local keys = redis.call('hkeys', KEYS[1]); " +
		"for n, key in ipairs(keys) do " +
		"counter = tonumber(redis.call('hget', KEYS[1], key)); " +
		"if type(counter) == 'number' then " +
		"for i=counter, 1, -1 do " +
		"local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); " +
		"maxRemainTime = math.max(remainTime, maxRemainTime);" +
		"end; " +
		"end; " +
		"end; " +
		"if maxRemainTime > 0 then " +
		"redis.call('pexpire', KEYS[1], maxRemainTime); " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0; " +
		"end;" +
		"if mode == 'write' then " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0;" +
		"end; " +
		"end; " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return 1; "

	// readForceUnlock is RedissonReadLock.forceUnlockAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonReadLock.java at tag redisson-4.7.0.
	readForceUnlock = "" +
		"if (redis.call('hget', KEYS[1], 'mode') == 'read') then " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0; "

	// readIsLocked is RedissonReadLock.isLocked.
	// Source: redisson/src/main/java/org/redisson/RedissonReadLock.java at tag redisson-4.7.0.
	readIsLocked = "" +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == 'read') or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then " +
		"return 1; " +
		"end; " +
		"return 0; "

	// readRenew3 is ReadLockTask's renewal in 3.52.0 (KEYS pairs [name, keyPrefix], ARGV [lease, lockName per pair]).
	// Source: redisson/src/main/java/org/redisson/renewal/ReadLockTask.java at tag redisson-3.52.0.
	readRenew3 = "" +
		"local result = {} " +
		"local j = 1 " +
		"for i = 1, #KEYS, 2 do " +
		"j = j + 1; " +
		"local counter = redis.call('hget', KEYS[i], ARGV[j]); " +
		"if (counter ~= false) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"if (redis.call('hlen', KEYS[i]) > 1) then " +
		"local keys = redis.call('hkeys', KEYS[i]); " +
		"for n, key in ipairs(keys) do " +
		"counter = tonumber(redis.call('hget', KEYS[i], key)); " +
		"if type(counter) == 'number' then " +
		"for i=counter, 1, -1 do " +
		"redis.call('pexpire', KEYS[i+1] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]); " +
		"end; " +
		"end; " +
		"end; " +
		"end; " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;"

	// readRenew4 is ReadLockTask's renewal in 4.4.0 to 4.7.0 (KEYS pairs [name, keyPrefix], ARGV [lease, then per pair: count, lockNames]).
	// Source: redisson/src/main/java/org/redisson/renewal/ReadLockTask.java at tag redisson-4.7.0.
	readRenew4 = "" +
		"local result = {} " +
		"local argIdx = 2 " +
		"for i = 1, #KEYS, 2 do " +
		"local anyAlive = false; " +
		"local lockNamesCount = tonumber(ARGV[argIdx]); " +
		"argIdx = argIdx + 1; " +
		"for k = 1, lockNamesCount do " +
		"local counter = redis.call('hget', KEYS[i], ARGV[argIdx]); " +
		"if (counter ~= false) then " +
		"anyAlive = true; " +
		"for c=counter, 1, -1 do " +
		"redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]); " +
		"end; " +
		"end; " +
		"argIdx = argIdx + 1; " +
		"end; " +
		"if (anyAlive) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;"

	// writeAcquire is RedissonWriteLock.tryLockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java at tag redisson-4.7.0.
	writeAcquire = "" +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'write'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'write') then " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local currentExpire = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); " +
		"return nil; " +
		"end; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);"

	// writeRelease is RedissonWriteLock.unlockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java at tag redisson-4.7.0.
	writeRelease = "" +
		"local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return nil; " +
		"end;" +
		"if (mode == 'write') then " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"else " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('hdel', KEYS[1], ARGV[3]); " +
		"if (redis.call('hlen', KEYS[1]) == 1) then " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"else " +
		// has unlocked read-locks
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"end; " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; " +
		"end; " +
		"end; " +
		"return nil;"

	// writeForceUnlock is RedissonWriteLock.forceUnlockAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonWriteLock.java at tag redisson-4.7.0.
	writeForceUnlock = "" +
		"if (redis.call('hget', KEYS[1], 'mode') == 'write') then " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0; "

	// spinAcquire is RedissonSpinLock.tryLockInnerAsync.
	// Source: redisson/src/main/java/org/redisson/RedissonSpinLock.java at tag redisson-4.7.0.
	spinAcquire = "" +
		"if (redis.call('exists', KEYS[1]) == 0) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);"

	// spinRelease is RedissonSpinLock.unlockInnerAsync: no publish.
	// Source: redisson/src/main/java/org/redisson/RedissonSpinLock.java at tag redisson-4.7.0.
	spinRelease = "" +
		"local val = redis.call('get', KEYS[2]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"redis.call('set', KEYS[2], 0, 'px', ARGV[3]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call('set', KEYS[2], 1, 'px', ARGV[3]); " +
		"return 1; " +
		"end; "

	// spinForceUnlock is RedissonSpinLock.forceUnlockAsync: no publish.
	// Source: redisson/src/main/java/org/redisson/RedissonSpinLock.java at tag redisson-4.7.0.
	spinForceUnlock = "" +
		"if (redis.call('del', KEYS[1]) == 1) then " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"

	// nonReentrantAcquire is RedissonNonReentrantLock.tryLockInnerAsync (4.4.0 and later; absent in 3.52.0).
	// Source: redisson/src/main/java/org/redisson/RedissonNonReentrantLock.java at tag redisson-4.7.0.
	nonReentrantAcquire = "" +
		"if redis.call('exists', KEYS[1]) == 0 then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " +
		"return redis.error_reply(ARGV[3]); " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);"
)
