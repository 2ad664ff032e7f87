/* uuid.c: GPU UUIDs in the driver's CUuuid, through common/gpu-uuid.c,
 * which cudackptctl parses them with too. */
#include "varlink/uuid.h"

#include "gpu-uuid.h"

#include <string.h>

int uuid_parse(const char *s, CUuuid *ret_uuid)
{
        return gpu_uuid_parse(s, (unsigned char *)ret_uuid->bytes);
}

void uuid_format(const CUuuid *u, char buf[static UUID_STRING_MAX])
{
        gpu_uuid_format((const unsigned char *)u->bytes, buf);
}

bool uuid_equal(const CUuuid *a, const CUuuid *b)
{
        return memcmp(a->bytes, b->bytes, 16) == 0;
}
