-- Whether a half of Redisson's RReadWriteLock is locked, as its isLocked() answers
-- (read only). KEYS[1] lock name; ARGV[1] the half: 'read' or 'write'.
-- write: the hash is in mode 'write'. read: in mode 'read', or in mode 'write' with
-- reads (fields besides 'mode' and the writer's).
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] == 'write' then
    if mode == 'write' then
        return 1
    end
    return 0
end
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
