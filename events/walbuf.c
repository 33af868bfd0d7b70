//go:build cgo && (linux || darwin)

// walbuf: a SQLite VFS that wraps the platform's default VFS and coalesces
// the writes SQLite makes to a WAL file into one write per commit.
//
// SQLite writes each WAL frame as two writes, its 24-byte header and then
// its page; a call's commit in agentctl is about ten frames, so twenty
// pwrite(2)s, and on a virtual machine every system call is dear
// (BENCHMARKS.md, session 14). This VFS keeps a WAL file's contiguous writes
// in memory and writes them out with one write:
//
//   - when the page of a commit frame (a frame header whose "database size
//     after commit" field is not zero) has been buffered: from inside the
//     xWrite that SQLite checks, before SQLite updates the wal-index header
//     that makes the commit visible to any reader, so a failed write fails
//     the commit exactly as it does without this VFS;
//   - before any other operation on the WAL file (read, sync, truncate,
//     size, file control, close), so SQLite and its fsyncs see the file
//     as if every write had gone straight through;
//   - never for a write that follows a read of the WAL (a rewrite in place,
//     such as SQLite's re-checksumming of frames): it goes straight through;
//   - before the write is not contiguous with what is buffered, or would
//     grow the buffer past WB_MAX;
//   - before the connection's main database file touches the wal-index
//     (xShmLock, xShmMap, xShmUnmap, xShmBarrier): a safety net; the commit
//     frame's write has already emptied the buffer.
//
// Nothing else changes: every byte SQLite writes reaches the file, in the
// order SQLite wrote it, before any reader in any process can be pointed
// at it, and before every sync. A process that dies with bytes buffered
// had not finished the commit they belong to; SQLite's WAL recovery
// already treats such a tail as never written (its frames' checksums and
// commit marker are missing). Databases are byte-identical to those
// written without it.

#include <stdlib.h>
#include <string.h>

typedef long long int sqlite3_int64;
typedef struct sqlite3_file sqlite3_file;
typedef struct sqlite3_io_methods sqlite3_io_methods;
typedef struct sqlite3_vfs sqlite3_vfs;
typedef void (*sqlite3_syscall_ptr)(void);

// The following three declarations are SQLite's public, ABI-stable
// structures, as sqlite3.h (public domain) declares them.
struct sqlite3_file {
  const struct sqlite3_io_methods *pMethods;
};

struct sqlite3_io_methods {
  int iVersion;
  int (*xClose)(sqlite3_file*);
  int (*xRead)(sqlite3_file*, void*, int iAmt, sqlite3_int64 iOfst);
  int (*xWrite)(sqlite3_file*, const void*, int iAmt, sqlite3_int64 iOfst);
  int (*xTruncate)(sqlite3_file*, sqlite3_int64 size);
  int (*xSync)(sqlite3_file*, int flags);
  int (*xFileSize)(sqlite3_file*, sqlite3_int64 *pSize);
  int (*xLock)(sqlite3_file*, int);
  int (*xUnlock)(sqlite3_file*, int);
  int (*xCheckReservedLock)(sqlite3_file*, int *pResOut);
  int (*xFileControl)(sqlite3_file*, int op, void *pArg);
  int (*xSectorSize)(sqlite3_file*);
  int (*xDeviceCharacteristics)(sqlite3_file*);
  int (*xShmMap)(sqlite3_file*, int iPg, int pgsz, int, void volatile**);
  int (*xShmLock)(sqlite3_file*, int offset, int n, int flags);
  void (*xShmBarrier)(sqlite3_file*);
  int (*xShmUnmap)(sqlite3_file*, int deleteFlag);
  int (*xFetch)(sqlite3_file*, sqlite3_int64 iOfst, int iAmt, void **pp);
  int (*xUnfetch)(sqlite3_file*, sqlite3_int64 iOfst, void *p);
};

struct sqlite3_vfs {
  int iVersion;
  int szOsFile;
  int mxPathname;
  sqlite3_vfs *pNext;
  const char *zName;
  void *pAppData;
  int (*xOpen)(sqlite3_vfs*, const char *zName, sqlite3_file*, int flags, int *pOutFlags);
  int (*xDelete)(sqlite3_vfs*, const char *zName, int syncDir);
  int (*xAccess)(sqlite3_vfs*, const char *zName, int flags, int *pResOut);
  int (*xFullPathname)(sqlite3_vfs*, const char *zName, int nOut, char *zOut);
  void *(*xDlOpen)(sqlite3_vfs*, const char *zFilename);
  void (*xDlError)(sqlite3_vfs*, int nByte, char *zErrMsg);
  void (*(*xDlSym)(sqlite3_vfs*, void*, const char *zSymbol))(void);
  void (*xDlClose)(sqlite3_vfs*, void*);
  int (*xRandomness)(sqlite3_vfs*, int nByte, char *zOut);
  int (*xSleep)(sqlite3_vfs*, int microseconds);
  int (*xCurrentTime)(sqlite3_vfs*, double*);
  int (*xGetLastError)(sqlite3_vfs*, int, char *);
  int (*xCurrentTimeInt64)(sqlite3_vfs*, sqlite3_int64*);
  int (*xSetSystemCall)(sqlite3_vfs*, const char *zName, sqlite3_syscall_ptr);
  sqlite3_syscall_ptr (*xGetSystemCall)(sqlite3_vfs*, const char *zName);
  const char *(*xNextSystemCall)(sqlite3_vfs*, const char *zName);
};

// Provided by go-sqlite3's amalgamation, linked into the same binary.
sqlite3_vfs *sqlite3_vfs_find(const char *zVfsName);
int sqlite3_vfs_register(sqlite3_vfs*, int makeDflt);
sqlite3_file *sqlite3_database_file_object(const char*);

#define SQLITE_OK 0
#define SQLITE_ERROR 1
#define SQLITE_NOMEM 7
#define SQLITE_OPEN_WAL 0x00080000
#define WAL_HDRSIZE 32
#define WAL_FRAME_HDRSIZE 24

// WB_MAX bounds a WAL file's buffer: a transaction larger than this (a
// migration, a rebuild) is written out in pieces of about this size.
#define WB_MAX (1 << 20)

// WB_CHUNK bounds one write to the default VFS: the unix VFS masks a
// write's size with 0x1ffff (a write of 128 KiB or more is cut short).
#define WB_CHUNK (31 * 4096)

typedef struct WbFile WbFile;
struct WbFile {
  sqlite3_file base;
  sqlite3_file *real;   // the default VFS's file, stored after this struct
  WbFile *wal;          // main database: its WAL file, opened by the same connection
  WbFile *db;           // WAL file: its main database file
  int isWal;
  int commitHdr;        // the last write buffered was a commit frame's header
  int lastRead;         // the last operation on this WAL file was a read
  unsigned char *buf;
  sqlite3_int64 off;    // the file offset of buf[0]
  int n, cap;
};

#define WB_HDR ((int)((sizeof(WbFile) + 7) & ~7))

static sqlite3_vfs *wbOrig;
static long long wbCommits;  // commit frames written out by wbWrite (tests)
static sqlite3_vfs wbVfs;
static sqlite3_io_methods wbMethods[3];

static int wbOurs(sqlite3_file *f) {
  return f != 0 && f->pMethods != 0 &&
         f->pMethods >= &wbMethods[0] && f->pMethods <= &wbMethods[2];
}

// wbFlush writes out p's buffer with one write (per WB_CHUNK); the buffer is empty after,
// whether the write succeeded or not (SQLite rewrites what a failed
// transaction needs).
static int wbFlush(WbFile *p) {
  int rc, n = p->n;
  if (n == 0) return SQLITE_OK;
  p->n = 0;
  p->commitHdr = 0;
  rc = SQLITE_OK;
  for (int i = 0; i < n && rc == SQLITE_OK; i += WB_CHUNK) {
    int k = n - i < WB_CHUNK ? n - i : WB_CHUNK;
    rc = p->real->pMethods->xWrite(p->real, p->buf + i, k, p->off + i);
  }
  if (p->cap > 4 * 65536) {  // a large transaction's buffer is not kept
    free(p->buf);
    p->buf = 0;
    p->cap = 0;
  }
  return rc;
}

static int wbFlushWal(WbFile *p) {
  return p->wal ? wbFlush(p->wal) : SQLITE_OK;
}

static int wbClose(sqlite3_file *f) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (p->wal) p->wal->db = 0;
  if (p->db) p->db->wal = 0;
  free(p->buf);
  p->buf = 0;
  int rc2 = p->real->pMethods->xClose(p->real);
  return rc != SQLITE_OK ? rc : rc2;
}

static int wbRead(sqlite3_file *f, void *z, int iAmt, sqlite3_int64 iOfst) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (rc != SQLITE_OK) return rc;
  p->lastRead = p->isWal;
  return p->real->pMethods->xRead(p->real, z, iAmt, iOfst);
}

static int wbWrite(sqlite3_file *f, const void *z, int iAmt, sqlite3_int64 iOfst) {
  WbFile *p = (WbFile *)f;
  int rc;
  if (!p->isWal) return p->real->pMethods->xWrite(p->real, z, iAmt, iOfst);
  if (p->lastRead) {
    // A write after a read is a rewrite in place (SQLite re-checksumming
    // frames it has read back): it goes straight through, so that no
    // write of it can be left for the wal-index barrier, which cannot
    // report an error. (The read emptied the buffer.)
    p->lastRead = 0;
    return p->real->pMethods->xWrite(p->real, z, iAmt, iOfst);
  }
  if (p->n > 0 && (iOfst != p->off + p->n || p->n + iAmt > WB_MAX)) {
    int wasCommit = p->commitHdr;
    rc = wbFlush(p);
    if (rc != SQLITE_OK) return rc;
    if (wasCommit) {
      // Cannot happen (a commit header's page follows it), but if it
      // did, nothing of the commit may stay behind.
      return p->real->pMethods->xWrite(p->real, z, iAmt, iOfst);
    }
  }
  if (iAmt > WB_MAX) return p->real->pMethods->xWrite(p->real, z, iAmt, iOfst);
  if (p->n + iAmt > p->cap) {
    int cap = p->cap ? p->cap : 65536;
    while (cap < p->n + iAmt) cap *= 2;
    unsigned char *b = realloc(p->buf, cap);
    if (b == 0) {
      rc = wbFlush(p);
      if (rc != SQLITE_OK) return rc;
      return p->real->pMethods->xWrite(p->real, z, iAmt, iOfst);
    }
    p->buf = b;
    p->cap = cap;
  }
  if (p->n == 0) p->off = iOfst;
  memcpy(p->buf + p->n, z, iAmt);
  p->n += iAmt;
  if (p->commitHdr) {  // a commit frame is complete
    __atomic_add_fetch(&wbCommits, 1, __ATOMIC_RELAXED);
    return wbFlush(p);
  }
  if (iAmt == WAL_FRAME_HDRSIZE && iOfst >= WAL_HDRSIZE) {
    const unsigned char *h = (const unsigned char *)z;
    p->commitHdr = (h[4] | h[5] | h[6] | h[7]) != 0;
  }
  return SQLITE_OK;
}

static int wbTruncate(sqlite3_file *f, sqlite3_int64 size) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xTruncate(p->real, size);
}

static int wbSync(sqlite3_file *f, int flags) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xSync(p->real, flags);
}

static int wbFileSize(sqlite3_file *f, sqlite3_int64 *pSize) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xFileSize(p->real, pSize);
}

static int wbLock(sqlite3_file *f, int l) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xLock(p->real, l);
}

static int wbUnlock(sqlite3_file *f, int l) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xUnlock(p->real, l);
}

static int wbCheckReservedLock(sqlite3_file *f, int *pResOut) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xCheckReservedLock(p->real, pResOut);
}

static int wbFileControl(sqlite3_file *f, int op, void *pArg) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlush(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xFileControl(p->real, op, pArg);
}

static int wbSectorSize(sqlite3_file *f) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xSectorSize(p->real);
}

static int wbDeviceCharacteristics(sqlite3_file *f) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int wbShmMap(sqlite3_file *f, int iPg, int pgsz, int bExtend, void volatile **pp) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlushWal(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xShmMap(p->real, iPg, pgsz, bExtend, pp);
}

static int wbShmLock(sqlite3_file *f, int offset, int n, int flags) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlushWal(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void wbShmBarrier(sqlite3_file *f) {
  WbFile *p = (WbFile *)f;
  (void)wbFlushWal(p);  // void: the commit frame's xWrite reported any error
  p->real->pMethods->xShmBarrier(p->real);
}

static int wbShmUnmap(sqlite3_file *f, int deleteFlag) {
  WbFile *p = (WbFile *)f;
  int rc = wbFlushWal(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}

static int wbFetch(sqlite3_file *f, sqlite3_int64 iOfst, int iAmt, void **pp) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xFetch(p->real, iOfst, iAmt, pp);
}

static int wbUnfetch(sqlite3_file *f, sqlite3_int64 iOfst, void *pv) {
  WbFile *p = (WbFile *)f;
  return p->real->pMethods->xUnfetch(p->real, iOfst, pv);
}

static int wbOpen(sqlite3_vfs *vfs, const char *zName, sqlite3_file *f, int flags, int *pOutFlags) {
  WbFile *p = (WbFile *)f;
  (void)vfs;
  memset(p, 0, sizeof(*p));
  p->real = (sqlite3_file *)((char *)p + WB_HDR);
  int rc = wbOrig->xOpen(wbOrig, zName, p->real, flags, pOutFlags);
  if (p->real->pMethods == 0) {
    p->base.pMethods = 0;
    return rc;
  }
  int v = p->real->pMethods->iVersion;
  if (v > 3) v = 3;
  if (v < 1) v = 1;
  p->base.pMethods = &wbMethods[v - 1];
  if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && zName != 0) {
    p->isWal = 1;
    sqlite3_file *db = sqlite3_database_file_object(zName);
    if (wbOurs(db)) {
      p->db = (WbFile *)db;
      p->db->wal = p;
    }
  }
  return rc;
}

static int wbDelete(sqlite3_vfs *v, const char *z, int syncDir) { (void)v; return wbOrig->xDelete(wbOrig, z, syncDir); }
static int wbAccess(sqlite3_vfs *v, const char *z, int fl, int *r) { (void)v; return wbOrig->xAccess(wbOrig, z, fl, r); }
static int wbFullPathname(sqlite3_vfs *v, const char *z, int n, char *o) { (void)v; return wbOrig->xFullPathname(wbOrig, z, n, o); }
static void *wbDlOpen(sqlite3_vfs *v, const char *z) { (void)v; return wbOrig->xDlOpen(wbOrig, z); }
static void wbDlError(sqlite3_vfs *v, int n, char *z) { (void)v; wbOrig->xDlError(wbOrig, n, z); }
static void (*wbDlSym(sqlite3_vfs *v, void *h, const char *z))(void) { (void)v; return wbOrig->xDlSym(wbOrig, h, z); }
static void wbDlClose(sqlite3_vfs *v, void *h) { (void)v; wbOrig->xDlClose(wbOrig, h); }
static int wbRandomness(sqlite3_vfs *v, int n, char *z) { (void)v; return wbOrig->xRandomness(wbOrig, n, z); }
static int wbSleep(sqlite3_vfs *v, int us) { (void)v; return wbOrig->xSleep(wbOrig, us); }
static int wbCurrentTime(sqlite3_vfs *v, double *t) { (void)v; return wbOrig->xCurrentTime(wbOrig, t); }
static int wbGetLastError(sqlite3_vfs *v, int n, char *z) { (void)v; return wbOrig->xGetLastError(wbOrig, n, z); }
static int wbCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *t) { (void)v; return wbOrig->xCurrentTimeInt64(wbOrig, t); }
static int wbSetSystemCall(sqlite3_vfs *v, const char *z, sqlite3_syscall_ptr fn) { (void)v; return wbOrig->xSetSystemCall(wbOrig, z, fn); }
static sqlite3_syscall_ptr wbGetSystemCall(sqlite3_vfs *v, const char *z) { (void)v; return wbOrig->xGetSystemCall(wbOrig, z); }
static const char *wbNextSystemCall(sqlite3_vfs *v, const char *z) { (void)v; return wbOrig->xNextSystemCall(wbOrig, z); }

// agentctl_walbuf_commits is how many commits this process has written
// through the buffer (for tests).
long long agentctl_walbuf_commits(void) {
  return __atomic_load_n(&wbCommits, __ATOMIC_RELAXED);
}

// agentctl_walbuf_register registers the VFS under name, wrapping the
// default VFS; not the default itself. It returns an SQLite result code.
// Called once (sync.Once on the Go side).
int agentctl_walbuf_register(const char *name) {
  wbOrig = sqlite3_vfs_find(0);
  if (wbOrig == 0) return SQLITE_ERROR;
  for (int i = 0; i < 3; i++) {
    sqlite3_io_methods *m = &wbMethods[i];
    m->iVersion = i + 1;
    m->xClose = wbClose;
    m->xRead = wbRead;
    m->xWrite = wbWrite;
    m->xTruncate = wbTruncate;
    m->xSync = wbSync;
    m->xFileSize = wbFileSize;
    m->xLock = wbLock;
    m->xUnlock = wbUnlock;
    m->xCheckReservedLock = wbCheckReservedLock;
    m->xFileControl = wbFileControl;
    m->xSectorSize = wbSectorSize;
    m->xDeviceCharacteristics = wbDeviceCharacteristics;
    if (i >= 1) {
      m->xShmMap = wbShmMap;
      m->xShmLock = wbShmLock;
      m->xShmBarrier = wbShmBarrier;
      m->xShmUnmap = wbShmUnmap;
    }
    if (i >= 2) {
      m->xFetch = wbFetch;
      m->xUnfetch = wbUnfetch;
    }
  }
  wbVfs.iVersion = wbOrig->iVersion < 3 ? wbOrig->iVersion : 3;
  wbVfs.szOsFile = WB_HDR + wbOrig->szOsFile;
  wbVfs.mxPathname = wbOrig->mxPathname;
  wbVfs.zName = name;
  wbVfs.pAppData = 0;
  wbVfs.xOpen = wbOpen;
  wbVfs.xDelete = wbDelete;
  wbVfs.xAccess = wbAccess;
  wbVfs.xFullPathname = wbFullPathname;
  wbVfs.xDlOpen = wbOrig->xDlOpen ? wbDlOpen : 0;
  wbVfs.xDlError = wbOrig->xDlError ? wbDlError : 0;
  wbVfs.xDlSym = wbOrig->xDlSym ? wbDlSym : 0;
  wbVfs.xDlClose = wbOrig->xDlClose ? wbDlClose : 0;
  wbVfs.xRandomness = wbRandomness;
  wbVfs.xSleep = wbSleep;
  wbVfs.xCurrentTime = wbCurrentTime;
  wbVfs.xGetLastError = wbOrig->xGetLastError ? wbGetLastError : 0;
  if (wbVfs.iVersion >= 2) wbVfs.xCurrentTimeInt64 = wbOrig->xCurrentTimeInt64 ? wbCurrentTimeInt64 : 0;
  if (wbVfs.iVersion >= 3) {
    wbVfs.xSetSystemCall = wbOrig->xSetSystemCall ? wbSetSystemCall : 0;
    wbVfs.xGetSystemCall = wbOrig->xGetSystemCall ? wbGetSystemCall : 0;
    wbVfs.xNextSystemCall = wbOrig->xNextSystemCall ? wbNextSystemCall : 0;
  }
  return sqlite3_vfs_register(&wbVfs, 0);
}
