-- rlock's read release with the unlock latch: the read half of Redisson's RReadWriteLock.
-- KEYS[1] lock name, KEYS[2] channel "redisson_rwlock:{name}", KEYS[3] the reader's
-- timeout-key prefix, KEYS[4] the key prefix "{name}" of every reader's timeout keys,
-- KEYS[5] latch key.
-- ARGV[1] unlock message ('0'), ARGV[2] reader field, ARGV[3] publish command (empty:
-- publish nothing), ARGV[4] latch ttl ms, ARGV[5] the lease of the field's holds left (ms).
-- Returns the latch's value when this request already ran, nil when the field does not
-- hold the lock, 0 when the field still has a hold, 1 when its last hold went (the lock
-- may still be held by other readers, or by this owner's write hold), 4 as 1 when the ACL
-- refused the unlock message (release.lua, P1-77).
-- As Redisson's: the top hold's timeout key goes; while other holds remain, the hash's
-- expiry becomes the longest of the remaining readers' timeout keys (never shorter than it
-- was while a writer holds); with no reader left in mode read, the hash is deleted and '0'
-- published (wake one). Unlike Redisson's, a partial release first extends the field's
-- remaining timeout keys to at least ARGV[5]: the hold released need not be the top one,
-- and the holds left must keep their lease. Every command Redis may refuse comes before
-- the first change.
local done = redis.call('get', KEYS[5])
if done ~= false then
    return tonumber(done)
end
local heard = true -- the unlock message was published (or none was to be)
local count = redis.call('hget', KEYS[1], ARGV[2])
if count == false or redis.call('hexists', KEYS[1], 'mode') == 0 then
    -- not held, or another kind of lock's hash (no 'mode'): not this lock's hold
    return nil
end
count = tonumber(count)
if count == nil or count ~= math.floor(count) or count < 1 then
    return redis.error_reply('ERR rlock: hold count of the field is not an integer')
end
local mode = redis.call('hget', KEYS[1], 'mode')
local fields = redis.call('hlen', KEYS[1])
if count == 1 then
    fields = fields - 1
end
local left = -3
if fields > 1 then
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], f))
        if type(n) == 'number' then
            if f == ARGV[2] then
                n = n - 1 -- the hold being released
            end
            for i = n, 1, -1 do
                left = math.max(left, redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i))
            end
        end
    end
end
local answer = 1
if count > 1 then
    answer = 0
    local lease = tonumber(ARGV[5])
    for i = 1, count - 1 do
        local p = redis.call('pttl', KEYS[3] .. ':' .. i)
        if p == -2 or p >= lease then
            left = math.max(left, p)
        else
            left = math.max(left, lease)
        end
    end
end
if fields > 1 and (left > 0 or mode == 'write') then
    redis.call('set', KEYS[5], answer, 'px', ARGV[4])
    if count > 1 then
        for i = 1, count - 1 do
            local k = KEYS[3] .. ':' .. i
            local p = redis.call('pttl', k)
            if p ~= -2 and p < tonumber(ARGV[5]) then
                redis.call('pexpire', k, ARGV[5])
            end
        end
    end
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    if count == 1 then
        redis.call('hdel', KEYS[1], ARGV[2])
    end
    redis.call('del', KEYS[3] .. ':' .. count)
    if left > 0 and (mode ~= 'write' or redis.call('pttl', KEYS[1]) < left) then
        redis.call('pexpire', KEYS[1], left)
    end
    return answer
end
if ARGV[3] ~= '' then
    local published = redis.pcall(ARGV[3], KEYS[2], ARGV[1])
    if type(published) == 'table' and published.err then
        heard = false -- the ACL refused the message (P1-77): released without it
    end
end
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
redis.call('del', KEYS[1], KEYS[3] .. ':' .. count)
if heard then
    return 1
end
return 4
