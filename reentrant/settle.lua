-- rlock's settlement of a request whose answer was lost (an acquire or a release of the
-- holder field): afterwards the request can no longer change anything, and the answer
-- tells whether it ran. Redisson's layout: the record is an unlock-latch key.
-- KEYS[1] lock name, KEYS[2] the request's record (its unlock-latch key).
-- ARGV[1] holder field, ARGV[2] record ttl ms.
-- Returns {record, count}: record -1 when the request had not run as a release (the
-- record is now written, so it never will: an acquire finds it and does nothing, a
-- release returns 2), else the release's own answer (0 a hold remained, 1 released);
-- count the field's holds now.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count == nil then
    return redis.error_reply('ERR rlock: hold count of the field is not an integer')
end
local record = redis.call('get', KEYS[2])
if record == false then
    redis.call('set', KEYS[2], 2, 'px', ARGV[2])
    record = -1
end
return {tonumber(record), count}
