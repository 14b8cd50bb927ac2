# C types for the Cython build of markdown.py; the .py stays the reference and runs
# unchanged without them. The walk's frames and contexts become C structs, the
# renderer's per-node methods C methods.
import cython

# Frame kinds (module constants of the .py)
cdef Py_ssize_t _ROOT, _SHARED_INLINE, _SHARED_BLOCK, _HEADING, _LIST, _LI, _QUOTE, _PRE, _PRE_BLOCK
cdef Py_ssize_t _CODE, _BOLD, _ITALIC, _LINK, _TABLE, _TR, _CELL, _CAPTION, _DL, _DT, _DD, _TSECTION

cdef class _Ctx:
    cdef public bint pre, code, bold, italic, link, flat, cell, thead
    cdef public Py_ssize_t lists, quotes, depth
    cdef public object pre_frame

cdef class _Frame:
    cdef public Py_ssize_t kind
    cdef public object node, next
    cdef public list parts
    cdef public _Ctx ctx
    cdef public object info

@cython.locals(first=str)
cdef str _escape_line_start(str line)

cdef class _Renderer:
    cdef public bint md, links, images

    @cython.locals(stack=list, frame=_Frame, child=_Frame, tag=str)
    cdef _walk(self, _Frame root_frame)

    @cython.locals(ctx=_Ctx)
    cdef _text(self, _Frame frame, text)

    @cython.locals(ctx=_Ctx, parts=list, nested_ok=bint, frame_ctx=_Ctx, new=_Frame, attrs=dict)
    cdef _Frame _open(self, _Frame frame, node, str tag)

    @cython.locals(parts=list, ctx=_Ctx, kind=Py_ssize_t)
    cdef _finish(self, _Frame frame, list out)

    @cython.locals(parts=list, text=str, core=str, lead=str, trail=str, content=str, kind=Py_ssize_t)
    cdef _finish_inline(self, _Frame frame, list out)

    @cython.locals(pieces=list)
    cdef str _flat_text(self, list parts)

    @cython.locals(text=str)
    cdef str _paragraph(self, list run, bint line_escape)

    @cython.locals(blocks=list, run=list, items=list, text=str)
    cdef list _blocks(self, list parts, bint line_escape)
