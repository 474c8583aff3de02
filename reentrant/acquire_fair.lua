-- rlock's acquire of Redisson's fair lock (getFairLock), answered per request as the plain
-- acquire is. The lock is the plain lock's hash; KEYS[2] is the FIFO of waiting holder
-- fields, KEYS[3] each waiter's timeout (scored in ms of the clients' clocks: a waiter
-- whose timeout passed counts as gone and is pruned from the head).
-- KEYS[1] lock name, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] the request's record.
-- ARGV[1] lease ms, ARGV[2] holder field, ARGV[3] the holds the client knows the field has,
-- ARGV[4] the wait ms (Redisson's threadWaitTime), ARGV[5] now (the client's clock, ms),
-- ARGV[6] '1' to join the queue when the lock cannot be had, '0' never to,
-- ARGV[7] the longest this waiter sleeps between its attempts (ms; '0' or absent: Redisson's
-- rule). A queued waiter that sends it keeps its place (safety-3 R3-5): an attempt whose
-- timeout, lowered by ARGV[4] for each grant that may come ahead of it (position - 1), would
-- not outlast its next attempt (now + min(the wait it is told, ARGV[7])) raises it to that
-- + position x ARGV[4]. Redisson's waiters keep Redisson's rule.
-- Returns {status, value, position}:
--   {1, count, 0}   acquired: the field has count holds (and is out of the queue);
--   {0, wait, pos}  not acquired: pos is the field's place in the queue (1 the head,
--                   0 not queued); wait the holder's pttl (-1 no expiry), or when the
--                   lock is free the time until the head's timeout;
--   {2, count, 0}   the field has fewer holds than the client knows: some were lost;
--   {3, 0, 0}       the request was cancelled (its record exists): nothing changed.
-- A re-entry never shortens the key's expiry. A hash with a 'mode' field is a read-write
-- lock: busy (not queued), and none of its fields is counted as this lock's hold.
if redis.call('exists', KEYS[4]) == 1 then
    return {3, 0, 0}
end
local now = tonumber(ARGV[5])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local t = redis.call('zscore', KEYS[3], head)
    if t == false or tonumber(t) > now then
        break
    end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
local known = tonumber(ARGV[3])
local lease = tonumber(ARGV[1])
local wait = tonumber(ARGV[4])
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if count == nil then
    return redis.error_reply('ERR rlock: hold count of the field is not an integer')
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    -- a read-write lock: another layout, whose fields are not this lock's holds
    return {0, redis.call('pttl', KEYS[1]), 0}
end
if count == known + 1 then
    -- this request ran before and its reply was lost
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, 0}
end
if count < known then
    return {2, count, 0}
end
if count > 0 then
    count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return {1, count, 0}
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (head == false or head == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local waiting = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #waiting do
        redis.call('zincrby', KEYS[3], -wait, waiting[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    return {1, 1, 0}
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
    -- free, but another waiter comes first: until its timeout, unless woken
    ttl = math.max(0, tonumber(redis.call('zscore', KEYS[3], head) or '0') - now)
end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine ~= false then
    local pos = (redis.call('lpos', KEYS[2], ARGV[2]) or -1) + 1
    local keep = tonumber(ARGV[7] or '0')
    if keep > 0 and pos > 0 then
        local sleep = keep
        if ttl >= 0 and ttl < keep then
            sleep = ttl
        end
        -- Raised only when the pos - 1 grants that may come before this
        -- waiter heads the queue could leave its timeout before its next
        -- attempt: a timeout Redisson's rule set is otherwise kept as is.
        if tonumber(mine) - (pos - 1) * wait <= now + sleep then
            redis.call('zadd', KEYS[3], now + sleep + pos * wait, ARGV[2])
        end
    end
    return {0, ttl, pos}
end
if ARGV[6] ~= '1' then
    return {0, ttl, 0}
end
local last = redis.call('lindex', KEYS[2], -1)
local ahead = ttl
if last ~= false and last ~= ARGV[2] then
    local t = redis.call('zscore', KEYS[3], last)
    if t ~= false then
        ahead = tonumber(t) - now
    end
end
if redis.call('zadd', KEYS[3], ahead + wait + now, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return {0, ahead, redis.call('llen', KEYS[2])}
